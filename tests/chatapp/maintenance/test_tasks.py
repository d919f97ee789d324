"""Beat's housekeeping: what it deletes and that it is scheduled."""

from __future__ import annotations

import datetime as dt

import pytest
from django.conf import settings
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.utils import timezone

from chatapp.celery import app
from chatapp.maintenance.tasks import clear_expired_sessions

pytestmark = pytest.mark.django_db


def test_expired_sessions_are_deleted_and_live_ones_kept() -> None:
    live = SessionStore()
    live["user"] = "still here"
    live.create()
    stale = SessionStore()
    stale.create()
    Session.objects.filter(session_key=stale.session_key).update(
        expire_date=timezone.now() - dt.timedelta(minutes=1)
    )

    clear_expired_sessions.delay()  # eager in tests, as in the embedded default

    assert list(Session.objects.values_list("session_key", flat=True)) == [live.session_key]


def test_beat_schedules_every_housekeeping_task_that_exists() -> None:
    app.loader.import_default_modules()
    for entry in settings.CELERY_BEAT_SCHEDULE.values():
        assert entry["task"] in app.tasks, entry["task"]
