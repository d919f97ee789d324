"""Following one run as a watcher (a socket or an API request): in order, and to its end.

The relay sends a watcher every entry of the run, live, and a heartbeat; entries can still be
lost on the way (a full channel, a Redis restart) and the relay can die with its process. A
watcher therefore keeps a `RunWatch`: the next seq it needs (a gap asks the owner to replay
once), and when it last heard from the owner. When the owner has been silent too long, or says
the run is gone, `run_rest` finds how the run ended: from its log, from the stored row, or by
ending it (only once its owner is known to be silent, see `recovery`). `RunFollower` holds
these rules; the socket and the API request both follow runs with it, and each only renders
what it returns in its own format.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from pydantic import ValidationError

from chatapp.answers.entries import LogEntry, LoggedEnd
from chatapp.answers.messages import (
    AnswerEntry,
    AnswerGone,
    AnswerStarted,
    AttachAnswer,
    RelayReply,
    relay_reply_adapter,
)
from chatapp.answers.recovery import Orphans, run_abandon_if_orphaned
from chatapp.answers.timeline import FirstTokenClock
from chatapp.conversations import selectors
from chatapp.conversations.models import Message
from inference.wire.protocol import stats_of

logger = logging.getLogger(__name__)

Taken = Literal["show", "repeat", "gap"]


def silence_limit_s(heartbeat_s: float) -> float:
    """How long a watcher waits without hearing from the owner before checking on it."""
    return max(0.5, 2.5 * heartbeat_s)


@dataclass
class RunWatch:
    """What one watcher has of one run."""

    message_id: uuid.UUID
    run_id: uuid.UUID
    owner: str  # the channel of the relay that owns the run
    client_id: uuid.UUID | None  # the frame that asked for it, echoed on errors
    next_seq: int = 1  # the next seq the watcher needs
    last_heard: float = field(default_factory=time.monotonic)
    resyncing: bool = False  # a gap was seen; the owner is replaying from next_seq
    # the run's first-token marks, for a run this watcher started (same process as its relay)
    clock: FirstTokenClock | None = None

    def heard(self) -> None:
        self.last_heard = time.monotonic()

    def silent_for(self) -> float:
        return time.monotonic() - self.last_heard

    def take(self, entry: LogEntry) -> Taken:
        """Whether to show `entry` now; a "gap" needs `resync()` sent to the owner (once)."""
        if entry.seq < self.next_seq:
            return "repeat"  # replayed and live copies overlap: show once
        if entry.seq > self.next_seq:
            return "gap"
        self.resyncing = False
        self.next_seq = entry.seq + 1
        return "show"

    def resync(self, *, watcher: str) -> AttachAnswer | None:
        """The attach that replays from the last entry shown; None while one is under way."""
        if self.resyncing:
            return None
        self.resyncing = True
        return self.attach(watcher=watcher)

    def attach(self, *, watcher: str) -> AttachAnswer:
        return AttachAnswer(
            message_id=self.message_id,
            run_id=self.run_id,
            watcher=watcher,
            after_seq=self.next_seq - 1,
        )


@dataclass(frozen=True, slots=True)
class StoredAnswer:
    """The run's log is gone (expired, or Redis lost it): the stored row is the truth."""

    content: str
    end: LoggedEnd


@dataclass(frozen=True, slots=True)
class Followed:
    """What a watcher does with the entries that came in: show `show`, in order (the last one
    may be the run's end), and, after a gap, send `resync` to the owner (it replays)."""

    show: list[LogEntry]
    resync: AttachAnswer | None = None


def entries_follow(watch: RunWatch, entries: Iterable[LogEntry], *, watcher: str) -> Followed:
    """Each entry once and in seq order: repeats are skipped, a gap stops at what is shown
    and asks for a replay (once), and nothing comes after the end."""
    show: list[LogEntry] = []
    for entry in entries:
        taken = watch.take(entry)
        if taken == "repeat":
            continue
        if taken == "gap":
            return Followed(show=show, resync=watch.resync(watcher=watcher))
        show.append(entry)
        if isinstance(entry, LoggedEnd):
            break
    return Followed(show=show)


RowLoader = Callable[[], Awaitable[Message | None]]
Send = Callable[[str, dict[str, Any]], Awaitable[None]]


async def run_rest(
    *, orphans: Orphans, watch: RunWatch, load_row: RowLoader
) -> list[LogEntry] | StoredAnswer | None:
    """How the run ended, from `watch.next_seq` on; None when it has not ended (its owner is
    alive: attach again). A run counts as ended once its row is stored, not when its end is
    logged: the owner logs the end first, and a watcher told before the row is written could
    reload the page and find the answer still streaming."""
    for _ in range(2):
        entries = await orphans.log.entries_after(run_id=watch.run_id, seq=watch.next_seq - 1)
        row = await load_row()
        if row is None:  # deleted (an edit in another tab removed the turn)
            return StoredAnswer(content="", end=_end_of(None, seq=watch.next_seq))
        if row.run_id != watch.run_id:  # a regenerate or edit replaced this run
            return StoredAnswer(content="", end=_end_of(None, seq=watch.next_seq))
        if row.status != Message.Status.STREAMING:
            if entries and isinstance(entries[-1], LoggedEnd) and _contiguous(entries, watch):
                return entries
            return StoredAnswer(content=row.content, end=_end_of(row, seq=watch.next_seq))
        ended = await run_abandon_if_orphaned(
            orphans=orphans, message_id=watch.message_id, run_id=watch.run_id
        )
        if ended is None:
            return None
    return None


@dataclass(frozen=True, slots=True)
class WorkerStarted:
    """A worker began the answer (it is prefilling); a page can say so."""


Shown = LogEntry | StoredAnswer | WorkerStarted  # what a watcher shows, in order
Receive = Callable[[], Awaitable[dict[str, Any]]]


@dataclass
class RunFollower:
    """One watcher's following of one run: what the owner sends, a silence, or a "gone" goes
    in; what to show comes out, in order, once each, to the run's end. The socket (many runs
    on one channel) and the API request (one run on a channel of its own, `followed`) both
    follow runs with it and only render what it returns."""

    watch: RunWatch
    orphans: Orphans
    load_row: RowLoader
    watcher: str  # this watcher's channel
    send: Send
    ended: bool = False

    @classmethod
    def of_user(
        cls, watch: RunWatch, *, user: User, orphans: Orphans, watcher: str, send: Send
    ) -> RunFollower:
        """Following one of `user`'s answers (its stored row read as theirs)."""
        return cls(
            watch=watch,
            orphans=orphans,
            load_row=lambda: database_sync_to_async(selectors.answer_get)(
                owner=user, message_id=watch.message_id
            ),
            watcher=watcher,
            send=send,
        )

    def silent(self) -> bool:
        return self.watch.silent_for() >= silence_limit_s(settings.CHAT_RELAY_HEARTBEAT_S)

    async def on_reply(self, reply: RelayReply) -> list[Shown]:
        """What the owner sent (for any run: only this one's counts)."""
        if reply.run_id != self.watch.run_id or self.ended:
            return []
        self.watch.heard()
        if isinstance(reply, AnswerEntry):
            return await self._follow([reply.entry])
        if isinstance(reply, AnswerGone):
            return await self.check()
        if isinstance(reply, AnswerStarted):
            return [WorkerStarted()]
        return []  # alive: heard

    async def check(self) -> list[Shown]:
        """After a silence or a "gone": how the run ended (`run_rest`). Not ended and its owner
        not known dead: attach again to the owner the run's record names (what it sent was
        lost) and check again after the next silence."""
        watch = self.watch
        rest = await run_rest(orphans=self.orphans, watch=watch, load_row=self.load_row)
        if rest is None:
            owner = await self.orphans.log.ownership(run_id=watch.run_id)
            if owner is not None:
                watch.owner = owner.relay_channel
            watch.heard()
            watch.resyncing = False
            if watch.owner:
                await self.send(watch.owner, watch.attach(watcher=self.watcher).to_channel())
            return []
        if isinstance(rest, StoredAnswer):
            self.ended = True
            return [rest]
        return await self._follow(rest)

    async def _follow(self, entries: list[LogEntry]) -> list[Shown]:
        followed = entries_follow(self.watch, entries, watcher=self.watcher)
        if followed.resync is not None and self.watch.owner:
            await self.send(self.watch.owner, followed.resync.to_channel())
        if followed.show and isinstance(followed.show[-1], LoggedEnd):
            self.ended = True
        return list(followed.show)


async def followed(follower: RunFollower, receive: Receive) -> AsyncIterator[Shown]:
    """Everything a watcher with a channel of its own shows of one run, to its end: what
    arrives on the channel (`receive`), and a check whenever the owner falls silent."""
    watch = follower.watch
    limit = silence_limit_s(settings.CHAT_RELAY_HEARTBEAT_S)
    while not follower.ended:
        shown: list[Shown]
        if not watch.owner:  # following a run that was not live when we came
            shown = await follower.check()
        else:
            try:
                async with asyncio.timeout(max(0.01, limit - watch.silent_for())):
                    raw = await receive()
            except TimeoutError:
                shown = await follower.check()
            except Exception as exc:  # Redis restarting: the silence check decides
                logger.warning("receive for answer %s failed: %s", watch.message_id, exc)
                await asyncio.sleep(0.2)
                shown = await follower.check() if follower.silent() else []
            else:
                try:
                    reply = relay_reply_adapter.validate_python(raw)
                except ValidationError:
                    continue
                shown = await follower.on_reply(reply)
        for item in shown:
            yield item


def _contiguous(entries: list[LogEntry], watch: RunWatch) -> bool:
    return [e.seq for e in entries] == list(range(watch.next_seq, watch.next_seq + len(entries)))


def _end_of(row: Message | None, *, seq: int) -> LoggedEnd:
    """A stored row as the end entry its run would have logged."""
    if row is None or row.status == Message.Status.STREAMING:
        return LoggedEnd(
            seq=seq,
            status="failed",
            error_code="interrupted",
            error_message="This answer was replaced or removed; ask again to get a new one.",
        )
    return LoggedEnd(
        seq=seq,
        status=row.status,
        finish_reason=row.finish_reason
        or ("stop" if row.status == Message.Status.COMPLETE else ""),
        error_code=row.error_code,
        error_message="This answer failed; ask again to get a new one."
        if row.status == Message.Status.FAILED
        else "",
        **stats_of(row).model_dump(),
    )
