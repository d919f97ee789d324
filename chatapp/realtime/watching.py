"""What one chat socket shows of the runs it watches, in order, to their end.

The socket never owns a run: the relay of whichever web process started it does. For each
answer on screen the socket keeps a `RunWatch` (chatapp/answers/follower.py) and turns what
the owner sends (entries, heartbeats, "gone") into browser frames; when the owner falls silent
it finds out how the run ended, and ends it only once the owner is known dead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import User

from chatapp.answers.entries import LoggedDelta, LoggedEnd
from chatapp.answers.follower import RunFollower, RunWatch, Shown, StoredAnswer, WorkerStarted
from chatapp.answers.messages import DetachAnswer, StopAnswer, relay_reply_adapter
from chatapp.answers.recovery import owner_state
from chatapp.answers.runtime import answer_runtime
from chatapp.answers.timeline import FirstTokenClock
from chatapp.conversations import selectors
from chatapp.conversations.models import Message
from chatapp.realtime.schemas import (
    ERROR_CODES,
    AnyServerFrame,
    DeltaFrame,
    DoneFrame,
    ErrorFrame,
    FirstTokenHops,
    SnapshotFrame,
    StartedFrame,
    SuggestedEntry,
    Timings,
    Usage,
)
from chatapp.unavailable import retry_after_s
from inference.wire import retry
from inference.wire.protocol import stats_of

logger = logging.getLogger(__name__)

WATCHDOG_EVENT = {"type": "chat.watchdog"}  # the consumer's handler: chat_watchdog


class Layer(Protocol):
    async def send(self, channel: str, message: dict[str, Any]) -> None: ...


SendFrame = Callable[[AnyServerFrame], Awaitable[None]]


class SocketWatching:
    """The runs one socket shows, by message id."""

    def __init__(self, *, layer: Layer, channel_name: str, user: User, send: SendFrame) -> None:
        self._layer = layer
        self._channel = channel_name
        self._user = user
        self._send = send
        self._following: dict[uuid.UUID, RunFollower] = {}

    @property
    def busy(self) -> bool:
        return bool(self._following)

    def only(self) -> uuid.UUID | None:
        """The one answer shown, if exactly one is."""
        return next(iter(self._following)) if len(self._following) == 1 else None

    async def started(self, watch: RunWatch) -> None:
        """Show a run this socket just started (its owner will send everything from seq 1)."""
        self._following[watch.message_id] = await self._follower(watch)

    async def follow(self, message: Message, *, after_seq: int, client_id: uuid.UUID) -> None:
        """Show an answer from `after_seq` on: live from its owner, or as it ended."""
        if message.id in self._following:
            return  # this socket already shows it (a retry on the same socket)
        if message.run_id is None:  # written before runs existed and long finished
            await self._show_stored(message, client_id=client_id)
            return
        follower = await self._follower(
            RunWatch(
                message_id=message.id,
                run_id=message.run_id,
                owner="",
                client_id=client_id,
                next_seq=after_seq + 1,
            )
        )
        if message.status == Message.Status.STREAMING:
            runtime = await answer_runtime()
            owner = await runtime.log.ownership(run_id=message.run_id)
            if owner_state(owner, silent_after_s=settings.CHAT_REAP_AFTER_S) == "alive":
                assert owner is not None
                watch = follower.watch
                watch.owner = owner.relay_channel
                watch.heard()
                self._following[message.id] = follower
                await self._layer.send(
                    watch.owner, watch.attach(watcher=self._channel).to_channel()
                )
                return
        await self._check(follower)

    async def stop(self, message_id: uuid.UUID | None) -> bool:
        """Ask the owner of the answer (shown here, or streaming in another tab) to stop it;
        its end comes back as an entry. False: nothing of the user's is streaming there."""
        message_id = message_id or self.only()
        if message_id is None:
            return False
        follower = self._following.get(message_id)
        if follower is not None:
            owner, run_id = follower.watch.owner, follower.watch.run_id
        else:
            message = await database_sync_to_async(selectors.answer_get)(
                owner=self._user, message_id=message_id
            )
            if message is None or message.status != Message.Status.STREAMING:
                return False
            if message.run_id is None:
                return False
            ownership = await (await answer_runtime()).log.ownership(run_id=message.run_id)
            if ownership is None:
                return False
            owner, run_id = ownership.relay_channel, message.run_id
        await self._layer.send(owner, StopAnswer(message_id=message_id, run_id=run_id).to_channel())
        return True

    async def detach_all(self) -> None:
        """The socket is closing: the runs go on for the grace period, so a refresh can resume."""
        for follower in self._following.values():
            watch = follower.watch
            with contextlib.suppress(Exception):
                await self._layer.send(
                    watch.owner,
                    DetachAnswer(
                        message_id=watch.message_id, run_id=watch.run_id, watcher=self._channel
                    ).to_channel(),
                )
        self._following.clear()

    # ---- what the owners send ------------------------------------------------------------

    async def on_reply(self, event: dict[str, Any]) -> None:
        """An entry, "started", "alive" or "gone" from the owner of a run shown here."""
        reply = relay_reply_adapter.validate_python(event)
        follower = self._following.get(reply.message_id)
        if follower is not None:
            await self._show(follower, await follower.on_reply(reply))

    async def on_watchdog(self) -> None:
        """An owner not heard from for a while: alive (what it sent us was lost) or dead with
        its web process. The follower's check tells which, and ends the run only in the
        second case."""
        for follower in list(self._following.values()):
            if follower.silent():
                await self._check(follower)

    async def watchdog_loop(self) -> None:
        """Wake the socket every heartbeat while it watches something; through its own channel,
        so the checks run in order with the entries."""
        interval = max(0.2, settings.CHAT_RELAY_HEARTBEAT_S)
        while True:
            retry.stop_if_cancelled()  # redis-py can swallow the cancel of a closed socket
            await asyncio.sleep(interval)
            if self._following:
                try:
                    await self._layer.send(self._channel, WATCHDOG_EVENT)
                except Exception as exc:  # Redis restarting: the next round tries again
                    logger.warning("socket watchdog could not report: %s", exc)

    # ---- showing -------------------------------------------------------------------------

    async def _follower(self, watch: RunWatch) -> RunFollower:
        return RunFollower.of_user(
            watch,
            user=self._user,
            orphans=(await answer_runtime()).relay.orphans,
            watcher=self._channel,
            send=self._layer.send,
        )

    async def _check(self, follower: RunFollower) -> None:
        """Watched until it ends: how it ended, or (its owner alive) from its owner again."""
        self._following[follower.watch.message_id] = follower
        await self._show(follower, await follower.check())

    async def _show(self, follower: RunFollower, shown: list[Shown]) -> None:
        """Send what the follower found new, as frames, in order."""
        watch = follower.watch
        if follower.ended:
            self._following.pop(watch.message_id, None)
        for item in shown:
            if isinstance(item, WorkerStarted):
                await self._send(StartedFrame(message_id=watch.message_id))
            elif isinstance(item, LoggedDelta):
                await self._send(
                    DeltaFrame(message_id=watch.message_id, seq=item.seq, text=item.text)
                )
                if watch.clock is not None and watch.clock.socket_first_delta is None:
                    watch.clock.socket_first_delta = time.monotonic()
            elif isinstance(item, StoredAnswer):
                # The log is gone: the stored message is the truth; replace what is shown.
                await self._send(SnapshotFrame(message_id=watch.message_id, content=item.content))
                await self._show_end(watch.message_id, item.end, client_id=watch.client_id)
            else:
                hops = _hops_of(watch.clock, item)
                await self._show_end(watch.message_id, item, client_id=watch.client_id, hops=hops)

    async def _show_stored(self, message: Message, *, client_id: uuid.UUID) -> None:
        await self._send(SnapshotFrame(message_id=message.id, content=message.content))
        status = message.status if message.status != Message.Status.STREAMING else "failed"
        await self._show_end(
            message.id,
            LoggedEnd(
                seq=1,
                status=status,  # complete, stopped or failed here
                finish_reason=message.finish_reason or "stop",
                error_code=message.error_code or "interrupted",
                error_message="This answer failed; ask again to get a new one.",
                **stats_of(message).model_dump(),
            ),
            client_id=client_id,
        )

    async def _show_end(
        self,
        message_id: uuid.UUID,
        end: LoggedEnd,
        *,
        client_id: uuid.UUID | None,
        hops: FirstTokenHops | None = None,
    ) -> None:
        if end.status == "failed":
            # Counted once per answer by its relay, not here.
            code = end.error_code if end.error_code in ERROR_CODES else "engine"
            await self._send(
                ErrorFrame(
                    id=client_id,
                    message_id=message_id,
                    code=code,
                    message=end.error_message or "The answer failed.",
                    # overloaded or no worker: asking again later works, and the page says when
                    retry_after_s=retry_after_s() if code in ("busy", "no_worker") else None,
                )
            )
            return
        await self._send(
            DoneFrame(
                message_id=message_id,
                status="stopped" if end.status == "stopped" else "complete",
                finish_reason=end.finish_reason,
                usage=Usage(
                    prompt_tokens=end.prompt_tokens,
                    completion_tokens=end.completion_tokens,
                    cached_prompt_tokens=end.cached_prompt_tokens,
                ),
                timings=Timings(
                    queue_wait_ms=end.queue_wait_ms, ttft_ms=end.ttft_ms, total_ms=end.total_ms
                ),
                source=end.source,
                faq_entry_id=end.faq_entry_id,
                resumed=end.resumed,
                hops=hops,
                suggested_entries=[
                    SuggestedEntry(entry_id=s.entry_id, question=s.question)
                    for s in end.suggested_entries
                ],
                offer_person=end.offer_person,
            )
        )


def _hops_of(clock: FirstTokenClock | None, end: LoggedEnd) -> FirstTokenHops | None:
    """The first-token hops of a run this socket started and saw from its first delta."""
    if clock is None or clock.socket_first_delta is None:
        return None
    worker = end.worker_hops
    return FirstTokenHops(
        admitted_ms=clock.since_received_ms(clock.admitted),
        stored_ms=clock.since_received_ms(clock.stored),
        queued_ms=clock.since_received_ms(clock.queued),
        relay_first_delta_ms=clock.since_received_ms(clock.relay_first_delta),
        socket_first_delta_ms=clock.since_received_ms(clock.socket_first_delta),
        worker_prompt_ms=None if worker is None else worker.prompt_ms,
        worker_engine_first_token_ms=None if worker is None else worker.engine_first_token_ms,
        worker_first_delta_sent_ms=None if worker is None else worker.first_delta_sent_ms,
    )
