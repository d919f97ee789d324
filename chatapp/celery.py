"""Celery app: background jobs (template warm-ups now; titles and cleanup later).

The embedded default runs tasks eagerly in the web process (no broker); with `REDIS_URL` set,
`celery -A chatapp worker` consumes them from Redis.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings.local")

app = Celery("chatapp")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
