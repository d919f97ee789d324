"""The chat WebSocket: validates frames, admits work, shows answers as they are generated.

A consumer handles one frame at a time, so generation never runs here. A send, regenerate or
edit (`chatapp/realtime/starting.py`) is admitted (limits in `chatapp.admission`), stored, and
handed to this process's answer relay, which owns the answer from then on: a socket only
*watches* answers (`chatapp/realtime/watching.py`). Entries reach the socket with their
`seq`; a socket that reconnects (to any web process) sends `chat.resume` with the last seq it
has and gets exactly the rest, then the live ones.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from typing import Any

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib.auth.models import User

from chatapp import unavailable
from chatapp.conversations import selectors, services
from chatapp.errors import ApplicationError
from chatapp.metrics import recording as metrics
from chatapp.prompts.events import TEMPLATES_GROUP
from chatapp.realtime.frame_budget import DRAFT, FRAME, RESUME, FrameBudget
from chatapp.realtime.handoff_socket import CustomerHandoff
from chatapp.realtime.intake import Refusal, frame_read
from chatapp.realtime.schemas import (
    AnyServerFrame,
    ClientTimingFrame,
    DraftFrame,
    EditFrame,
    ErrorFrame,
    FeedbackFrame,
    FeedbackRecordedFrame,
    HandoffFrame,
    RegenerateFrame,
    ResumeFrame,
    SendFrame,
    StopFrame,
    SyncFrame,
    TemplatesChangedFrame,
    TypingFrame,
)
from chatapp.realtime.starting import STAFF, AnswerStarting, StartPolicy
from chatapp.realtime.watching import SocketWatching
from chatapp.unavailable import database_unavailable

logger = logging.getLogger(__name__)


class ChatConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels is untyped
    watching: SocketWatching
    starting: AnswerStarting
    handoff: CustomerHandoff
    budget: FrameBudget
    _frame_bytes = 0  # size of the frame being handled, as received
    _received_at = 0.0  # monotonic: when the frame being handled was read (first-token clock)
    watchdog: asyncio.Task[None] | None = None

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' own dispatch, without its `close_old_connections` before every handler:
        that call runs on the one thread all sockets of the process share for database work,
        so every delta of every answer waited behind any slow query there (a send held 8 s by
        a row lock froze all streams for 8 s). Our database work goes through
        `database_sync_to_async`, which closes stale connections on that thread itself."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        await self.open_for(user)

    async def open_for(
        self, user: User, *, policy: StartPolicy = STAFF, subprotocol: str | None = None
    ) -> None:
        """Accept the socket for `user`: a staff member, or a website guest with its site's
        policy (limits, templates)."""
        self.watching = SocketWatching(
            layer=self.channel_layer,
            channel_name=self.channel_name,
            user=user,
            send=self._send_frame,
        )
        self.starting = AnswerStarting(
            user=user,
            channel_name=self.channel_name,
            watching=self.watching,
            send=self._send_frame,
            refuse=self._error,
            policy=policy,
        )
        self.handoff = CustomerHandoff(
            user=user,
            layer=self.channel_layer,
            channel_name=self.channel_name,
            send=self._send_frame,
            refuse=self._error,
        )
        self.budget = FrameBudget.from_settings()
        await self.channel_layer.group_add(TEMPLATES_GROUP, self.channel_name)
        await self.accept(subprotocol=subprotocol)
        self.watchdog = asyncio.create_task(self.watching.watchdog_loop())

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(TEMPLATES_GROUP, self.channel_name)
        if self.watchdog is not None:
            self.watchdog.cancel()
        watching = getattr(self, "watching", None)
        if watching is not None:
            await watching.detach_all()
        handoff = getattr(self, "handoff", None)
        if handoff is not None:
            await handoff.detach()

    # ---- browser -> server -------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        self._received_at = time.monotonic()
        if await self._over_budget(FRAME):
            return
        received = frame_read(text_data, max_bytes=settings.CHAT_MAX_FRAME_BYTES)
        if isinstance(received, Refusal):
            await self._error(
                ErrorFrame(code=received.code, message=received.message, id=received.client_id)
            )
            return
        frame, self._frame_bytes = received.frame, received.size_bytes
        try:
            if isinstance(frame, SendFrame):
                # a person asked for or holding the conversation: theirs, not the assistant's
                if not await self.handoff.took(frame):
                    await self.starting.send(
                        frame, received_at=self._received_at, frame_bytes=self._frame_bytes
                    )
            elif isinstance(frame, HandoffFrame):
                await self.handoff.handoff(frame)
            elif isinstance(frame, SyncFrame):
                await self.handoff.sync(frame)
            elif isinstance(frame, TypingFrame):
                await self.handoff.typing(frame)
            elif isinstance(frame, StopFrame):
                await self._on_stop(frame)
            elif isinstance(frame, RegenerateFrame):
                if not await self.handoff.refused_while_held(frame.message_id, client_id=frame.id):
                    await self.starting.regenerate(frame, received_at=self._received_at)
            elif isinstance(frame, ResumeFrame):
                if not await self._over_budget(RESUME, client_id=frame.id):
                    await self._on_resume(frame)
            elif isinstance(frame, EditFrame):
                if not await self.handoff.refused_while_held(frame.message_id, client_id=frame.id):
                    await self.starting.edit(
                        frame, received_at=self._received_at, frame_bytes=self._frame_bytes
                    )
            elif isinstance(frame, ClientTimingFrame):
                await self._on_client_timing(frame)
            elif isinstance(frame, DraftFrame):
                await self._on_draft(frame)
            else:
                await self._on_feedback(frame)
        except Exception as exc:  # the database or Redis failed under us: say so, keep the socket
            if database_unavailable(exc):  # out of pooled connections, or the server is away
                logger.warning("chat frame %s: database unavailable: %s", frame.type, exc)
                await self._error(
                    ErrorFrame(
                        code="unavailable",
                        message=unavailable.MESSAGE,
                        id=frame.id,
                        retry_after_s=unavailable.retry_after_s(),
                    )
                )
                return
            logger.exception("chat frame %s failed", frame.type)
            await self._error(
                ErrorFrame(
                    code="internal",
                    message="Something went wrong on our side and nothing was stored. "
                    "Please try again.",
                    id=frame.id,
                )
            )

    async def _over_budget(self, kind: str, *, client_id: uuid.UUID | None = None) -> bool:
        """Refuse a frame past the socket's budget (chatapp/realtime/frame_budget.py)."""
        retry_after = self.budget.take(kind=kind, now=time.monotonic())
        if retry_after is None:
            return False
        await self._error(
            ErrorFrame(
                code="rate_limited",
                message="Too many frames from this page; slow down.",
                id=client_id,
                retry_after_s=float(max(1, math.ceil(retry_after))),
            )
        )
        return True

    async def _on_resume(self, frame: ResumeFrame) -> None:
        message = await database_sync_to_async(selectors.answer_get)(
            owner=self.scope["user"], message_id=frame.message_id
        )
        if message is None:
            await self._error(
                ErrorFrame(
                    code="not_found",
                    message="No such answer in your conversations.",
                    id=frame.id,
                    message_id=frame.message_id,
                )
            )
            return
        await self.watching.follow(message, after_seq=frame.last_seq, client_id=frame.id)

    async def _on_stop(self, frame: StopFrame) -> None:
        if not await self.watching.stop(frame.message_id):
            await self._error(
                ErrorFrame(
                    code="not_found",
                    message="Nothing is streaming here to stop.",
                    id=frame.id,
                    message_id=frame.message_id,
                )
            )

    async def _on_feedback(self, frame: FeedbackFrame) -> None:
        try:
            await database_sync_to_async(services.message_feedback)(
                sender=self.scope["user"], message_id=frame.message_id, rating=frame.rating
            )
        except ApplicationError as exc:
            await self.starting.app_error(exc, client_id=frame.id, message_id=frame.message_id)
            return
        await self._send_frame(
            FeedbackRecordedFrame(id=frame.id, message_id=frame.message_id, rating=frame.rating)
        )

    async def _on_draft(self, frame: DraftFrame) -> None:
        """Typing prefill (`AnswerStarting.draft`): no reply unless it is refused. Nothing while
        an answer streams here: the engine is busy with this user's answer already."""
        if self.watching.busy or not settings.CHAT_TYPING_PREFILL:
            return
        if self.budget.take(kind=DRAFT, now=time.monotonic()) is not None:
            return  # past the socket's draft budget: a hint dropped, nothing lost
        if await self.starting.refused_text(frame.text, client_id=frame.id):
            return
        await self.starting.draft(frame)

    async def _on_client_timing(self, frame: ClientTimingFrame) -> None:
        """The browser's time to first token of one of the user's answers: stored once,
        observed once. No reply unless it is refused."""
        try:
            await database_sync_to_async(services.answer_client_ttft_record)(
                sender=self.scope["user"], message_id=frame.message_id, ttft_ms=frame.ttft_ms
            )
        except ApplicationError as exc:
            await self.starting.app_error(exc, client_id=frame.id, message_id=frame.message_id)
            return
        metrics.client_ttft(ttft_ms=frame.ttft_ms)

    # ---- relay -> socket (channel layer handlers) ---------------------------------------

    async def answer_entry(self, event: dict[str, Any]) -> None:
        await self.watching.on_reply(event)

    async def answer_started(self, event: dict[str, Any]) -> None:
        await self.watching.on_reply(event)

    async def answer_alive(self, event: dict[str, Any]) -> None:
        await self.watching.on_reply(event)

    async def answer_gone(self, event: dict[str, Any]) -> None:
        await self.watching.on_reply(event)

    async def chat_watchdog(self, event: dict[str, Any]) -> None:
        await self.watching.on_watchdog()

    async def handoff_state(self, event: dict[str, Any]) -> None:
        await self.handoff.on_state(event)

    async def handoff_message(self, event: dict[str, Any]) -> None:
        await self.handoff.on_message(event)

    async def handoff_typing(self, event: dict[str, Any]) -> None:
        await self.handoff.on_typing(event)

    async def templates_changed(self, event: dict[str, Any]) -> None:
        await self._send_frame(TemplatesChangedFrame(etag=str(event.get("etag", ""))))

    # ---- helpers -------------------------------------------------------------------------

    async def _send_frame(self, frame: AnyServerFrame) -> None:
        await self.send(text_data=frame.to_json())

    async def _error(self, frame: ErrorFrame) -> None:
        """Refuse a client frame (counted in chat:errors_total)."""
        metrics.error_sent(code=frame.code)
        await self._send_frame(frame)
