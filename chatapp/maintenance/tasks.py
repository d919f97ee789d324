"""Celery tasks: thin wrappers on services (scheduled by CELERY_BEAT_SCHEDULE)."""

from __future__ import annotations

import logging

from celery import shared_task

from chatapp.maintenance import services

logger = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def clear_expired_sessions() -> None:
    logger.info("deleted %d expired sessions", services.sessions_clear_expired())
