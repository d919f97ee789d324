"""Ending runs whose owner is gone, from what their log says.

A web process that dies takes its relay with it, and the runs it owned would stay "streaming"
forever, holding admission leases and worker slots. Whoever finds such a run (the reaper of any
web process, a socket resuming it, the API request watching it) ends it here, and only once
its owner is known to be dead (`orphan_verdict`): the logged end if there is one, otherwise
`failed` (`interrupted`) with the text that was logged; the write names the run, so it can
never land on a newer run of the same message. Ending it also frees what the dead owner held:
the run's admission lease and its request on the worker, and tells the owner, should it still
be alive but cut off, to stop.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, Protocol

from channels.db import database_sync_to_async
from django.utils import timezone

from chatapp.admission.limiter import Admission
from chatapp.answers.entries import LoggedEnd, text_of
from chatapp.answers.log import AnswerLog, Ownership
from chatapp.answers.messages import StopAnswer
from chatapp.conversations import selectors, services
from chatapp.conversations.models import Message
from chatapp.metrics import recording as metrics
from inference.wire.protocol import CancelRequest, stats_of

logger = logging.getLogger(__name__)

INTERRUPTED_MESSAGE = (
    "The answer was interrupted (the server handling it went away). What arrived is kept; "
    "please ask again."
)


class Sender(Protocol):
    async def send(self, channel: str, message: dict[str, Any]) -> None: ...


REAP_PAGE = 500  # streaming runs one reaper pass reads


@dataclass
class ReapCursor:
    up_to: selectors.StreamingRun | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Orphans:
    """What ending a dead owner's runs needs: its log, the shared admission and the layer."""

    log: AnswerLog
    admission: Admission
    layer: Sender
    silent_after_s: float  # an owner not heard from this long is dead
    # Runs this process owns itself are alive whatever their heartbeat says (an event loop
    # that stalled a moment must not end its own answers)
    owned_here: Callable[[uuid.UUID], bool] = lambda _run_id: False
    # runs seen with no owner record, and when first (monotonic): see `orphan_verdict`
    unknown_since: dict[uuid.UUID, float] = field(default_factory=dict)
    # where the reaper's last pass stopped: the next one reads the page after it
    reaped: ReapCursor = field(default_factory=ReapCursor)


OwnerState = Literal["alive", "silent", "unknown"]


def owner_state(owner: Ownership | None, *, silent_after_s: float) -> OwnerState:
    if owner is None:
        return "unknown"
    return "alive" if owner.silent_s < silent_after_s else "silent"


def orphan_verdict(
    state: OwnerState, *, unknown_for_s: float | None, silent_after_s: float
) -> Literal["alive", "dead", "wait"]:
    """Whether a run's owner is dead. A silent owner is. A missing owner record ("unknown")
    is not at first sight: Redis restarted without persistence loses every record until each
    live relay's next heartbeat writes its own again (a heartbeat, not `silent_after_s`,
    away), so only a record still missing `silent_after_s` after it was first seen missing
    means the owner is gone. `unknown_for_s`: since when this process has seen it missing
    (None: this is the first time)."""
    if state != "unknown":
        return "dead" if state == "silent" else "alive"
    if unknown_for_s is None or unknown_for_s < silent_after_s:
        return "wait"
    return "dead"


async def answer_store(
    *, message_id: uuid.UUID, run_id: uuid.UUID, content: str, end: LoggedEnd
) -> bool:
    """The one final write of a run. A write that lands on no row (the run had ended, or the
    row moved on to a newer run) is logged and counted, never silently dropped."""
    # Not the shared thread of thread-sensitive calls: a slow write here must not hold up
    # every socket's and relay's database work behind it.
    stored: bool = await database_sync_to_async(services.answer_finish, thread_sensitive=False)(
        message_id=message_id,
        run_id=run_id,
        content=content,
        status=Message.Status(end.status),
        finish_reason=end.finish_reason,
        error_code=end.error_code,
        stats=stats_of(end),
    )
    if not stored:
        logger.warning(
            "the end (%s) of run %s of answer %s matched no streaming row: not stored",
            end.status,
            run_id,
            message_id,
        )
        metrics.answer_write_fenced()
    return stored


async def lease_release(admission: Admission, *, run_id: uuid.UUID, user_key: str) -> None:
    """Free a run's admission slot; a failure only delays it (the lease expires on its own a
    few heartbeats later)."""
    try:
        await admission.release(request_id=str(run_id), user_key=user_key)
    except Exception as exc:
        logger.warning("could not release the lease of run %s: %s", run_id, exc)


async def run_abandon(
    *, orphans: Orphans, message_id: uuid.UUID, run_id: uuid.UUID, owner: Ownership | None
) -> LoggedEnd:
    """End a run whose owner is silent: store it from its log, free what the owner held.
    Returns the end the watchers should see."""
    entries = await orphans.log.entries_after(run_id=run_id, seq=0) or []
    last = entries[-1] if entries else None
    if isinstance(last, LoggedEnd):
        end = last
    else:
        end = LoggedEnd(
            seq=len(entries) + 1,
            status="failed",
            error_code="interrupted",
            error_message=INTERRUPTED_MESSAGE,
        )
    await answer_store(message_id=message_id, run_id=run_id, content=text_of(entries), end=end)
    if owner is not None:
        if owner.user_key:
            await lease_release(orphans.admission, run_id=run_id, user_key=owner.user_key)
        for channel, message in (
            (
                owner.worker_channel,
                CancelRequest(request_id=owner.worker_request_id or str(run_id)).to_channel(),
            ),
            (owner.relay_channel, StopAnswer(message_id=message_id, run_id=run_id).to_channel()),
        ):
            if channel:
                try:
                    await orphans.layer.send(channel, message)
                except Exception as exc:  # gone with its process: nothing to stop there
                    logger.info("could not reach %s for run %s: %s", channel, run_id, exc)
    return end


async def run_abandon_if_orphaned(
    *, orphans: Orphans, message_id: uuid.UUID, run_id: uuid.UUID
) -> LoggedEnd | None:
    """End the run if its owner is silent; None (nothing done) while the owner is alive."""
    if orphans.owned_here(run_id):
        return None
    owner = await orphans.log.ownership(run_id=run_id)
    state = owner_state(owner, silent_after_s=orphans.silent_after_s)
    now = time.monotonic()
    first_unknown = orphans.unknown_since.get(run_id)
    verdict = orphan_verdict(
        state,
        unknown_for_s=None if first_unknown is None else now - first_unknown,
        silent_after_s=orphans.silent_after_s,
    )
    if state == "unknown" and first_unknown is None:
        for seen in [r for r, t in orphans.unknown_since.items() if now - t > 60]:
            del orphans.unknown_since[seen]  # ended meanwhile by another process
        orphans.unknown_since[run_id] = now
    elif state != "unknown" or verdict == "dead":
        orphans.unknown_since.pop(run_id, None)
    if verdict != "dead":
        return None
    logger.warning(
        "run %s of answer %s lost its owner: storing it from the log", run_id, message_id
    )
    return await run_abandon(orphans=orphans, message_id=message_id, run_id=run_id, owner=owner)


async def orphaned_runs_finish(*, orphans: Orphans) -> int:
    """End streaming runs whose owner has been silent for `silent_after_s`; how many.

    Runs younger than that are left alone: their owner may not have written its first
    heartbeat yet.
    """
    started_before = timezone.now() - timedelta(seconds=orphans.silent_after_s)
    # Not on the shared thread every socket's database work queues on: a row lock or a long
    # read there must not hold the reaper (nor anything waiting on it) for seconds.
    candidates = await database_sync_to_async(selectors.streaming_runs, thread_sensitive=False)(
        started_before=started_before, after=orphans.reaped.up_to, limit=REAP_PAGE
    )
    # One page a pass, so a pass stays short however many answers stream; the passes walk
    # them all, oldest first, and start over after a short page.
    orphans.reaped.up_to = candidates[-1] if len(candidates) == REAP_PAGE else None
    finished = 0
    for run in candidates:
        ended = await run_abandon_if_orphaned(
            orphans=orphans, message_id=run.message_id, run_id=run.run_id
        )
        finished += ended is not None
    return finished
