"""The owner of every answer a web process starts, for as long as it generates.

Sockets come and go (a refresh, a network blip, another tab); the answer does not follow them.
The relay receives the worker's events on its own channel and, for each one, logs the entry
(for resume), sends it to every socket watching and, at the end, writes the message once and
frees the admission slot. It also fails answers nobody is producing any more: no worker took
the request (`no_worker`), the worker went silent (`worker_lost`), or part of the stream was
lost in transit (`interrupted`); and it aborts an answer nobody has watched for the grace
period. One relay per web process (per event loop), created on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from channels.db import database_sync_to_async
from pydantic import ValidationError

from chatapp.admission.limiter import Admission
from chatapp.answers.entries import LogEntry, LoggedDelta, LoggedEnd, text_of
from chatapp.answers.log import AnswerLog
from chatapp.answers.messages import (
    AnswerAlive,
    AnswerEntry,
    AnswerGone,
    AttachAnswer,
    DetachAnswer,
    relay_control_adapter,
)
from chatapp.answers.recovery import outcome_of
from chatapp.conversations import services
from chatapp.metrics import recording as metrics
from inference.protocol import (
    Accepted,
    CancelRequest,
    Delta,
    Done,
    Error,
    GenerateRequest,
    Heartbeat,
    worker_event_adapter,
)
from inference.registry import WorkerRegistry

logger = logging.getLogger(__name__)

# Worker error codes as the browser sees them (docs/protocol.md).
_WORKER_ERRORS = {
    "engine": "engine",
    "invalid_request": "invalid",
    "context_length": "too_long",
    "overloaded": "busy",
    "internal": "worker_lost",
}


class ChannelLayer(Protocol):
    async def send(self, channel: str, message: dict[str, Any]) -> None: ...

    async def receive(self, channel: str) -> dict[str, Any]: ...

    async def new_channel(self, prefix: str = ...) -> str: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RelaySettings:
    accept_timeout_s: float  # no worker took the request within this: no_worker
    queue_timeout_s: float  # workers are alive but busy: wait this long in their queue
    stall_timeout_s: float  # accepted, then silent this long: worker_lost
    disconnect_grace_s: float  # nobody watching this long: abort the generation
    heartbeat_s: float  # how often watchers and the log hear the relay is alive
    reap_every_s: float  # how often answers orphaned by a dead web process are finished
    reap_after_s: float  # an answer whose owner has not been heard from this long is orphaned


@dataclass
class _Tracked:
    message_id: uuid.UUID
    request_id: str
    user_key: str
    watchers: set[str]
    entries: list[LogEntry] = field(default_factory=list)
    worker_channel: str | None = None
    # why we asked the worker to stop: "" the user's Stop, "client_disconnected" the grace ran out
    stop_code: str | None = None
    last_event: float = field(default_factory=time.monotonic)
    unwatched_since: float | None = None
    faq_lookup: bool = False  # the request asked the FAQ cache first
    started_at: float = field(default_factory=time.monotonic)

    @property
    def next_seq(self) -> int:
        return len(self.entries) + 1


class AnswerRelay:
    def __init__(
        self,
        *,
        layer: ChannelLayer,
        log: AnswerLog,
        admission: Admission,
        registry: WorkerRegistry,
        settings: RelaySettings,
    ) -> None:
        self._layer = layer
        self._log = log
        self._admission = admission
        self._registry = registry
        self._settings = settings
        self._by_request: dict[str, _Tracked] = {}
        self._by_message: dict[uuid.UUID, _Tracked] = {}
        self.channel = ""
        self.ready = asyncio.Event()
        self._log_lock = asyncio.Lock()
        metrics.relay_started(self)

    @property
    def active_answers(self) -> int:
        return len(self._by_message)

    async def run(self) -> None:
        # The default prefix: channels_redis lets one receiver per prefix hold the process's read
        # lock, so a prefix of our own would starve the sockets' channels (and vice versa).
        self.channel = await self._layer.new_channel()
        self.ready.set()
        async with asyncio.TaskGroup() as group:
            group.create_task(self._receive_loop())
            group.create_task(self._tick_loop())

    # ---- called by the socket that starts an answer ---------------------------------------

    async def start(
        self,
        *,
        message_id: uuid.UUID,
        user_key: str,
        watcher: str,
        request: GenerateRequest,
        request_channel: str,
    ) -> None:
        """Track the answer, then send the request (built with `reply_channel=self.channel`).

        The caller holds an admission slot under `request.request_id`; the relay frees it when
        the answer ends, however it ends.
        """
        assert request.reply_channel == self.channel, "workers must answer this relay"
        stale = self._by_message.pop(message_id, None)
        if stale is not None:  # a regenerate can only follow an ended answer; be safe anyway
            self._by_request.pop(stale.request_id, None)
        tracked = _Tracked(
            message_id=message_id,
            request_id=request.request_id,
            user_key=user_key,
            watchers={watcher},
            faq_lookup=request.faq_lookup is not None,
        )
        self._by_request[request.request_id] = tracked
        self._by_message[message_id] = tracked
        try:
            await self._log.begin(message_id=message_id, relay_channel=self.channel)
        except Exception:  # resume is lost for this answer, the answer itself is not
            logger.exception("could not start the log of %s", message_id)
        try:
            await self._layer.send(request_channel, request.to_channel())
        except Exception as exc:
            logger.warning("could not queue %s: %s", request.request_id, exc)
            await self._end(
                tracked,
                LoggedEnd(
                    seq=tracked.next_seq,
                    status="failed",
                    error_code="busy",
                    error_message="The assistant is overloaded right now. Please try again.",
                ),
            )

    # ---- inbound: worker events and socket control --------------------------------------

    async def _receive_loop(self) -> None:
        backoff = 0.2
        while True:
            try:
                raw = await self._layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis restarting: keep trying, answers fail by watchdog
                logger.warning("relay receive failed (%s); retrying in %.1f s", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.2
            try:
                await self._dispatch(raw)
            except Exception:
                logger.exception("relay failed on a %r message", raw.get("type"))

    async def _dispatch(self, raw: dict[str, Any]) -> None:
        kind = str(raw.get("type", ""))
        try:
            if kind.startswith("answer."):
                control = relay_control_adapter.validate_python(raw)
                if isinstance(control, AttachAnswer):
                    await self._attach(control)
                elif isinstance(control, DetachAnswer):
                    self._detach(control)
                else:
                    await self.stop(control.message_id)
                return
            event = worker_event_adapter.validate_python(raw)
        except ValidationError:
            logger.warning("relay dropped a malformed %r message", kind)
            return
        tracked = self._by_request.get(event.request_id)
        if tracked is None:
            if isinstance(event, Accepted):  # we gave up on it: free the engine
                await self._send(
                    event.worker_channel, CancelRequest(request_id=event.request_id).to_channel()
                )
            return
        tracked.last_event = time.monotonic()
        if isinstance(event, Accepted):
            tracked.worker_channel = event.worker_channel
            if tracked.stop_code is not None:
                await self._cancel_upstream(tracked)
        elif isinstance(event, Heartbeat):
            pass
        elif isinstance(event, Delta):
            await self._on_delta(tracked, event)
        elif isinstance(event, Done):
            if event.seq > tracked.next_seq:  # the last deltas never came: not complete
                await self._end_lost(tracked)
                return
            await self._end(tracked, self._end_of_done(tracked, event))
        elif isinstance(event, Error):
            await self._end(
                tracked,
                LoggedEnd(
                    seq=tracked.next_seq,
                    status="failed",
                    error_code=_WORKER_ERRORS.get(event.code, "engine"),
                    error_message=event.message,
                ),
            )

    async def _on_delta(self, tracked: _Tracked, delta: Delta) -> None:
        if delta.seq < tracked.next_seq:
            return  # a repeat (a retried send): already have it
        if delta.seq > tracked.next_seq:
            # Events were lost (Redis restarted under the stream): the text has a hole.
            await self._cancel_upstream(tracked)
            await self._end_lost(tracked)
            return
        await self._publish(
            tracked, LoggedDelta(seq=delta.seq, text=delta.text, logprobs=delta.logprobs)
        )

    async def _end_lost(self, tracked: _Tracked) -> None:
        await self._end(
            tracked,
            LoggedEnd(
                seq=tracked.next_seq,
                status="failed",
                error_code="interrupted",
                error_message=(
                    "Part of the answer was lost in transit. What arrived is kept; "
                    "please ask again."
                ),
            ),
        )

    def _end_of_done(self, tracked: _Tracked, done: Done) -> LoggedEnd:
        stopped = done.finish_reason == "abort"
        return LoggedEnd(
            seq=tracked.next_seq,
            status="stopped" if stopped else "complete",
            finish_reason=done.finish_reason,
            error_code=(tracked.stop_code or "") if stopped else "",
            prompt_tokens=done.prompt_tokens,
            completion_tokens=done.completion_tokens,
            cached_prompt_tokens=done.cached_prompt_tokens,
            queue_wait_ms=done.queue_wait_ms,
            ttft_ms=done.ttft_ms,
            total_ms=done.total_ms,
            source=done.source,
            faq_entry_id=done.faq_entry_id,
        )

    async def _attach(self, attach: AttachAnswer) -> None:
        tracked = self._by_message.get(attach.message_id)
        if tracked is None:
            await self._send(attach.watcher, AnswerGone(message_id=attach.message_id).to_channel())
            return
        tracked.watchers.add(attach.watcher)
        tracked.unwatched_since = None
        # Sequential with the worker's events: nothing between this replay and the live ones.
        for entry in tracked.entries[attach.after_seq :]:
            await self._send(
                attach.watcher,
                AnswerEntry(message_id=tracked.message_id, entry=entry).to_channel(),
            )

    def _detach(self, detach: DetachAnswer) -> None:
        tracked = self._by_message.get(detach.message_id)
        if tracked is None:
            return
        tracked.watchers.discard(detach.watcher)
        if not tracked.watchers:
            tracked.unwatched_since = time.monotonic()

    async def stop(self, message_id: uuid.UUID, *, code: str = "") -> bool:
        """Abort the generation; the worker answers `done` (abort) and the answer ends stopped."""
        tracked = self._by_message.get(message_id)
        if tracked is None:
            return False
        if tracked.stop_code is None:
            tracked.stop_code = code
        if tracked.worker_channel is None:
            # Still queued: end it now; if a worker takes it later, `accepted` gets a cancel.
            await self._end(
                tracked,
                LoggedEnd(
                    seq=tracked.next_seq, status="stopped", finish_reason="abort", error_code=code
                ),
            )
            return True
        await self._cancel_upstream(tracked)
        return True

    # ---- periodic: watchdogs, grace period, heartbeats, orphan reaping ------------------

    async def _tick_loop(self) -> None:
        from chatapp.answers.recovery import orphaned_answers_finish

        s = self._settings
        interval = min(s.accept_timeout_s / 3, s.stall_timeout_s / 3, s.heartbeat_s, 1.0)
        last_heartbeat = last_reap = 0.0
        while True:
            now = time.monotonic()
            try:
                await self._check_timeouts(now)
                if now - last_heartbeat >= s.heartbeat_s:
                    last_heartbeat = now
                    await self._heartbeat()
                    metrics.admission_sampled(in_flight=await self._admission.outstanding())
                if now - last_reap >= s.reap_every_s:
                    last_reap = now
                    await orphaned_answers_finish(log=self._log, stale_after_s=s.reap_after_s)
            except Exception:  # Redis or the database away: try again next tick
                logger.exception("relay housekeeping failed")
            await asyncio.sleep(interval)

    async def _check_timeouts(self, now: float) -> None:
        s = self._settings
        for tracked in list(self._by_message.values()):
            silence = now - tracked.last_event
            if tracked.worker_channel is None and silence >= s.accept_timeout_s:
                if silence < s.queue_timeout_s and await self._registry.capacity() > 0:
                    continue  # queued behind other answers of live workers: keep waiting
                alive = silence < s.queue_timeout_s
                await self._end(
                    tracked,
                    LoggedEnd(
                        seq=tracked.next_seq,
                        status="failed",
                        error_code="no_worker" if alive else "busy",
                        error_message=(
                            "No inference worker is available right now. "
                            "Please try again in a moment."
                            if alive
                            else "The assistant was too busy to start your answer. "
                            "Please try again in a moment."
                        ),
                    ),
                )
            elif tracked.worker_channel is not None and silence >= s.stall_timeout_s:
                await self._cancel_upstream(tracked)  # in case it is alive but cut off
                await self._end(
                    tracked,
                    LoggedEnd(
                        seq=tracked.next_seq,
                        status="failed",
                        error_code="worker_lost",
                        error_message=(
                            "The assistant stopped responding (its worker was lost). What it "
                            "wrote so far is kept; please ask again."
                        ),
                    ),
                )
            elif (
                tracked.unwatched_since is not None
                and tracked.stop_code is None
                and now - tracked.unwatched_since >= s.disconnect_grace_s
            ):
                logger.info("nobody came back for %s: aborting it", tracked.message_id)
                await self.stop(tracked.message_id, code="client_disconnected")

    async def _heartbeat(self) -> None:
        tracked = list(self._by_message.values())
        for answer in tracked:
            for watcher in list(answer.watchers):
                await self._send(watcher, AnswerAlive(message_id=answer.message_id).to_channel())
        # Under the lock: no entry is appended between counting and rewriting a log.
        async with self._log_lock:
            broken = await self._log.heartbeat(
                relay_channel=self.channel,
                lengths={t.message_id: len(t.entries) for t in tracked},
            )
            for message_id in broken:  # Redis restarted under it: write it again from memory
                owned = self._by_message.get(message_id)
                if owned is None:
                    continue
                logger.warning("the log of %s is incomplete; writing it again", message_id)
                await self._log.begin(message_id=message_id, relay_channel=self.channel)
                for entry in owned.entries:
                    await self._log.append(message_id=message_id, entry=entry)

    # ---- helpers -----------------------------------------------------------------------

    async def _publish(self, tracked: _Tracked, entry: LogEntry) -> None:
        await self._record(tracked, entry)
        await self._broadcast(tracked, entry)

    async def _record(self, tracked: _Tracked, entry: LogEntry) -> None:
        tracked.entries.append(entry)
        try:
            async with self._log_lock:
                await self._log.append(message_id=tracked.message_id, entry=entry)
        except Exception as exc:  # live sockets still get it; only a later resume could miss it
            logger.warning("could not log seq %d of %s: %s", entry.seq, tracked.message_id, exc)

    async def _broadcast(self, tracked: _Tracked, entry: LogEntry) -> None:
        frame = AnswerEntry(message_id=tracked.message_id, entry=entry).to_channel()
        for watcher in list(tracked.watchers):
            await self._send(watcher, frame)

    async def _end(self, tracked: _Tracked, end: LoggedEnd) -> None:
        if self._by_message.get(tracked.message_id) is not tracked:
            return  # ended already
        del self._by_message[tracked.message_id]
        self._by_request.pop(tracked.request_id, None)
        metrics.answer_ended(end, faq_lookup=tracked.faq_lookup, elapsed_s=_since(tracked))
        await self._record(tracked, end)
        try:  # stored before anyone is told it ended: a reload right after shows it stored
            await database_sync_to_async(services.answer_finish)(
                message_id=tracked.message_id,
                content=text_of(tracked.entries),
                outcome=outcome_of(end),
            )
        except Exception:  # the log has the end: the orphan reaper writes it later
            logger.exception("could not store the answer %s", tracked.message_id)
        with contextlib.suppress(Exception):  # freed before the user can ask again
            await self._admission.release(request_id=tracked.request_id, user_key=tracked.user_key)
        await self._broadcast(tracked, end)

    async def _cancel_upstream(self, tracked: _Tracked) -> None:
        if tracked.worker_channel is not None:
            await self._send(
                tracked.worker_channel, CancelRequest(request_id=tracked.request_id).to_channel()
            )

    async def _send(self, channel: str, message: dict[str, Any]) -> None:
        try:
            await self._layer.send(channel, message)
        except Exception as exc:  # a full or vanished channel: the socket resyncs on a gap
            logger.warning("send to %s failed: %s", channel, exc)


def _since(tracked: _Tracked) -> float:
    return time.monotonic() - tracked.started_at
