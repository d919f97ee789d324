"""Housekeeping writes; each returns how much it removed so the task log says what it did."""

from __future__ import annotations

from django.contrib.sessions.models import Session
from django.utils import timezone


def sessions_clear_expired() -> int:
    """Delete expired login sessions (Django never deletes them by itself)."""
    deleted, _ = Session.objects.filter(expire_date__lt=timezone.now()).delete()
    return deleted
