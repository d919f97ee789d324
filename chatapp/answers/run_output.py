"""What a run's log and watchers receive (the relay's output side, `relay.py`).

Each entry is appended to the run's memory and its log together (for resume), then sent to
every watcher; a watcher that attaches gets what it missed first; every heartbeat each watcher
hears the run is alive and the log is renewed, or written again from memory where Redis lost
it. A failed send or log write is logged and
passed over: a watcher resyncs on a gap, a heartbeat rewrites the log.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from chatapp.answers.entries import LogEntry, LoggedEnd
from chatapp.answers.log import AnswerLog
from chatapp.answers.messages import AnswerAlive, AnswerEntry, AnswerGone, AttachAnswer
from chatapp.answers.run_state import Run

logger = logging.getLogger(__name__)


class Sender(Protocol):
    async def send(self, channel: str, message: dict[str, Any]) -> None: ...


class RunOutput:
    def __init__(self, *, layer: Sender, log: AnswerLog) -> None:
        self._layer = layer
        self._log = log
        # Appending to a run's memory and to its log happen together under this lock, so a
        # heartbeat that compares the two never sees one ahead of the other.
        self._log_lock = asyncio.Lock()

    async def begin(self, run: Run, *, relay_channel: str) -> None:
        try:
            await self._log.begin(
                run_id=run.run_id, relay_channel=relay_channel, user_key=run.user_key
            )
        except Exception:  # resume is lost for this run (until a heartbeat rewrites it)
            logger.exception("could not start the log of run %s", run.run_id)

    async def worker_taken(self, run_id: uuid.UUID, worker_channel: str, request_id: str) -> None:
        try:
            await self._log.worker_taken(
                run_id=run_id, worker_channel=worker_channel, request_id=request_id
            )
        except Exception as exc:  # only a dead owner's cleanup needs it
            logger.warning("could not record the worker of run %s: %s", run_id, exc)

    async def record(self, run: Run, entry: LogEntry) -> None:
        async with self._log_lock:
            run.entries.append(entry)
            try:
                await self._log.append(run_id=run.run_id, entry=entry)
            except Exception as exc:  # live watchers still get it; a heartbeat rewrites the log
                logger.warning("could not log seq %d of run %s: %s", entry.seq, run.run_id, exc)

    async def broadcast(self, run: Run, entry: LogEntry) -> None:
        entry_message = AnswerEntry(message_id=run.message_id, run_id=run.run_id, entry=entry)
        await self.to_watchers(run, entry_message.to_channel())

    async def to_watchers(self, run: Run, message: dict[str, Any]) -> None:
        for watcher in list(run.watchers):
            await self.send(watcher, message)

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        try:
            await self._layer.send(channel, message)
        except Exception as exc:  # a full or vanished channel: the watcher resyncs on a gap
            logger.warning("send to %s failed: %s", channel, exc)

    async def attach(self, run: Run | None, attach: AttachAnswer) -> None:
        """A watcher (a socket, an API request) follows the run from `after_seq` on; one that
        asks for a run the relay no longer has hears it is gone (read it from the database)."""
        watcher = attach.watcher
        if run is None:
            gone = AnswerGone(message_id=attach.message_id, run_id=attach.run_id)
            await self.send(watcher, gone.to_channel())
            return
        run.watchers.add(watcher)
        run.unwatched_since = None
        # Sequential with the worker's events: nothing between this replay and the live ones.
        # An ending run's end goes out once it is stored (the relay's final write).
        for entry in run.entries[attach.after_seq :]:
            if run.ending and isinstance(entry, LoggedEnd):
                break
            message = AnswerEntry(message_id=run.message_id, run_id=run.run_id, entry=entry)
            await self.send(watcher, message.to_channel())

    def detach(self, run: Run | None, *, watcher: str) -> None:
        if run is None:
            return
        run.watchers.discard(watcher)
        if not run.watchers:
            run.unwatched_since = time.monotonic()

    async def heartbeat(
        self, runs: list[Run], *, relay_channel: str, owned: Callable[[uuid.UUID], Run | None]
    ) -> None:
        """Tell each run's watchers it is alive; renew the logs, writing again from memory
        the ones Redis lost (`owned`: the run, if the relay still owns it)."""
        for run in runs:
            alive = AnswerAlive(message_id=run.message_id, run_id=run.run_id).to_channel()
            await self.to_watchers(run, alive)
        async with self._log_lock:
            broken = await self._log.heartbeat(
                relay_channel=relay_channel, lengths={r.run_id: len(r.entries) for r in runs}
            )
            for run_id in broken:  # Redis restarted under it: write it again from memory
                kept = owned(run_id)
                if kept is None:
                    continue
                logger.warning("the log of run %s is incomplete; writing it again", run_id)
                await self._log.rewrite(
                    run_id=run_id,
                    relay_channel=relay_channel,
                    user_key=kept.user_key,
                    entries=kept.entries,
                )
                if kept.worker_channel:
                    await self._log.worker_taken(
                        run_id=run_id,
                        worker_channel=kept.worker_channel,
                        request_id=kept.upstream_id,
                    )
