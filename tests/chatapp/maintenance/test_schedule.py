"""The beat schedule where no beat runs (embedded default): every job at start, then on time."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import subprocess
import sys

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone

from chatapp.maintenance.schedule import beat_schedule_run
from chatapp.websites import services
from chatapp.websites.models import Guest
from tests.chatapp.websites.sites import HOST, site_made


async def test_each_job_runs_at_start_then_every_its_interval_and_a_failure_stops_nothing() -> None:
    ran: list[str] = []

    async def run(task: str) -> None:
        ran.append(task)
        if task == "broken":
            raise RuntimeError("boom")

    schedule = {
        "often": {"task": "often", "schedule": 0.05},
        "broken": {"task": "broken", "schedule": 0.05},
        "rarely": {"task": "rarely", "schedule": 3600.0},
    }
    loop = asyncio.create_task(beat_schedule_run(schedule, run=run))
    await asyncio.sleep(0.32)
    loop.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await loop

    assert ran.count("rarely") == 1
    assert 4 <= ran.count("often") <= 8
    assert ran.count("broken") == ran.count("often")  # it kept being tried


@pytest.mark.django_db(transaction=True)
async def test_the_embedded_default_deletes_expired_guests_without_a_beat() -> None:
    site = await sync_to_async(site_made)(retention_days=1)
    entry = await sync_to_async(services.guest_enter)(site=site, origin=HOST, token=None)
    old = timezone.now() - datetime.timedelta(days=2)
    await sync_to_async(Guest.objects.filter(id=entry.guest.id).update)(last_seen_at=old)

    loop = asyncio.create_task(beat_schedule_run(settings.CELERY_BEAT_SCHEDULE))
    for _ in range(100):
        if not await sync_to_async(Guest.objects.exists)():
            break
        await asyncio.sleep(0.05)
    loop.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await loop

    assert not await sync_to_async(Guest.objects.exists)()


def test_every_scheduled_task_is_found_in_a_fresh_web_process() -> None:
    # `manage.py serve` runs no Celery worker, so Celery's registry never autodiscovers the
    # tasks there (NotRegistered, seen in a real run); they are found by their import path
    code = (
        "import django; django.setup()\n"
        "from django.conf import settings\n"
        "from chatapp.maintenance.schedule import scheduled_task\n"
        "for entry in settings.CELERY_BEAT_SCHEDULE.values():\n"
        "    assert callable(scheduled_task(entry['task'])), entry\n"
        "print('found', len(settings.CELERY_BEAT_SCHEDULE))\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "chatapp.settings.local"}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"found {len(settings.CELERY_BEAT_SCHEDULE)}"
