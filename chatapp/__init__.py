"""The web side: Django project, Channels edge and domain apps."""

from chatapp.celery import app as celery_app

__all__ = ["celery_app"]
