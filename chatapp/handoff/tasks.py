"""Celery tasks: thin wrappers on the handoff webhook's delivery (chatapp/handoff/webhook_runner.py
says where each runs)."""

from __future__ import annotations

import logging

from celery import shared_task

from chatapp.handoff import webhook_delivery, webhook_runner

logger = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def deliver_handoff_webhook(delivery_pk: int) -> None:
    webhook_delivery.delivery_attempt(delivery_pk)


@shared_task(ignore_result=True)
def retry_handoff_webhooks() -> None:
    """Scheduled (CELERY_BEAT_SCHEDULE): hand on the deliveries that are due."""
    handed = webhook_runner.deliveries_due_start()
    if handed:
        logger.info("handed on %d due handoff webhook deliveries", handed)
