"""Celery tasks: thin wrappers on services."""

from __future__ import annotations

from celery import shared_task

from chatapp.faq import services


@shared_task(ignore_result=True)
def embed_faq_entry(entry_id: int) -> None:
    services.faq_entry_embed(entry_id=entry_id)
