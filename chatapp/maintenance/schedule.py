"""The beat schedule run inside the web process, where no Celery beat runs (the embedded
default: no Redis, tasks eager). Same entries as CELERY_BEAT_SCHEDULE, so a job added there
runs here too: each once at start, then every its `schedule` seconds."""

from __future__ import annotations

import asyncio
import importlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from channels.db import database_sync_to_async

logger = logging.getLogger(__name__)


async def beat_schedule_run(
    schedule: Mapping[str, Mapping[str, Any]],
    *,
    run: Callable[[str], Awaitable[None]] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Run each entry's task when it is due, for ever. A task that fails is logged and runs
    again at its next time; it never stops the others."""
    run = run or _task_run
    due = {name: clock() for name in schedule}
    while True:
        now = clock()
        for name, entry in schedule.items():
            if due[name] > now:
                continue
            due[name] = now + float(entry["schedule"])
            try:
                await run(str(entry["task"]))
            except Exception:
                logger.exception(
                    "scheduled task %s failed; it runs again in %s s", name, entry["schedule"]
                )
        await asyncio.sleep(max(0.0, min(due.values()) - clock()))


def scheduled_task(task_name: str) -> Callable[[], object]:
    """The task by its import path: the web process never loads Celery's app, so its task
    registry is empty there (no autodiscovery)."""
    module, name = task_name.rsplit(".", 1)
    task: Callable[[], object] = getattr(importlib.import_module(module), name)
    return task


async def _task_run(task_name: str) -> None:
    await database_sync_to_async(scheduled_task(task_name))()
