"""Where handoff webhook attempts run: never on the caller's thread. A change is stored from a
socket through `database_sync_to_async`, whose one shared thread serves every socket's database
work; a slow helpdesk there would stall them all.

- With a broker (`REDIS_URL`): a Celery task per attempt (`chatapp.handoff.tasks`).
- The embedded default runs Celery tasks eagerly, inline: there, attempts go to one
  background thread of this process instead (one, so first attempts keep the order of the
  changes). A daemon thread: stopping the server never waits on a slow helpdesk; what it had
  not sent is in the database, and the sweep sends it after the restart.

The sweep (`deliveries_due_start`, every 10 s from CELERY_BEAT_SCHEDULE, which the embedded
default runs in the web process) hands on whatever is due: retries whose backoff has passed,
and rows whose first attempt never ran (the process died between commit and send).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from django.conf import settings
from django.db import connections
from django.utils import timezone

from chatapp.handoff.models import WebhookDelivery
from chatapp.handoff.webhook_delivery import delivery_attempt

logger = logging.getLogger(__name__)

SWEEP_BATCH = 100

_jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
_queued: set[int] = set()  # handed to the thread and not attempted yet: not handed again
_lock = threading.Lock()
_thread: threading.Thread | None = None


def delivery_start(delivery_pk: int) -> None:
    """Have the delivery attempted elsewhere; returns at once. A failure to hand it on is
    logged, not raised (this runs after the change committed): the sweep hands it on later."""
    try:
        if settings.CELERY_TASK_ALWAYS_EAGER:
            _in_thread(delivery_pk)
        else:
            from chatapp.handoff.tasks import deliver_handoff_webhook

            deliver_handoff_webhook.delay(delivery_pk)
    except Exception:
        logger.exception("handoff webhook %d not handed on; the sweep will", delivery_pk)


def deliveries_due_start() -> int:
    """Hand on the deliveries due now (oldest first, at most SWEEP_BATCH); how many."""
    if not settings.CHAT_HANDOFF_WEBHOOK_URL:
        return 0
    due = list(
        WebhookDelivery.objects.filter(
            status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=timezone.now()
        )
        .order_by("next_attempt_at", "id")
        .values_list("pk", flat=True)[:SWEEP_BATCH]
    )
    for pk in due:
        delivery_start(pk)
    return len(due)


def _in_thread(delivery_pk: int) -> None:
    with _lock:
        if delivery_pk in _queued:
            return
        _queued.add(delivery_pk)
    _submit(lambda: _attempt(delivery_pk))


def _submit(job: Callable[[], None]) -> None:
    global _thread
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run_jobs, name="handoff-webhook", daemon=True)
            _thread.start()
    _jobs.put(job)


def _run_jobs() -> None:
    while True:
        _jobs.get()()


def _attempt(delivery_pk: int) -> None:
    with _lock:
        _queued.discard(delivery_pk)
    try:
        delivery_attempt(delivery_pk)
    except Exception:
        logger.exception("handoff webhook %d attempt failed; the sweep tries again", delivery_pk)
    finally:
        connections.close_all()  # this thread's: back to the pool, no idle connection kept


def thread_drained(timeout_s: float) -> None:
    """Wait until the attempts handed to this process's thread so far have run (tests: the
    thread runs them in turn, so a marker handed on now runs after them)."""
    reached = threading.Event()
    _submit(reached.set)
    if not reached.wait(timeout_s):
        raise TimeoutError(f"handoff webhook attempts still running after {timeout_s} s")
