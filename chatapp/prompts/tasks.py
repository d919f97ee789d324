"""Celery tasks: thin wrappers on services."""

from __future__ import annotations

from celery import shared_task

from chatapp.prompts import services


@shared_task(ignore_result=True)
def warm_template_version(version_id: int) -> None:
    services.template_version_warm(version_id=version_id)
