"""Celery tasks: thin wrappers on services (scheduled by CELERY_BEAT_SCHEDULE)."""

from __future__ import annotations

import logging

from celery import shared_task

from chatapp.websites import services

logger = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def delete_expired_guests() -> None:
    logger.info("deleted %d guests past their site's retention", services.guests_delete_expired())
