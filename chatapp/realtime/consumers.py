"""The chat WebSocket: validates frames, admits work, shows answers as they are generated.

A consumer handles one frame at a time, so generation never runs here. A send is admitted
(limits in `chatapp.admission`), stored, and handed to this process's answer relay, which owns
the answer from then on: a socket only *watches* answers. Entries reach the socket with their
`seq`; a socket that reconnects (to any web process) sends `chat.resume` with the last seq it
has and gets exactly the rest, then the live ones.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from chatapp import unavailable
from chatapp.admission.limiter import Refused
from chatapp.answers import runs
from chatapp.answers.follower import RunWatch
from chatapp.conversations import selectors, services
from chatapp.conversations.message_text import text_refusal
from chatapp.errors import ApplicationError
from chatapp.metrics import recording as metrics
from chatapp.prompts.events import TEMPLATES_GROUP
from chatapp.prompts.resolution import ResendFull, templated_message_resolve
from chatapp.realtime.frame_budget import DRAFT, FRAME, RESUME, FrameBudget
from chatapp.realtime.intake import Refusal, frame_read
from chatapp.realtime.schemas import (
    ERROR_CODES,
    AcceptedFrame,
    AnyServerFrame,
    ClientTimingFrame,
    DraftFrame,
    EditFrame,
    ErrorCode,
    ErrorFrame,
    FeedbackFrame,
    FeedbackRecordedFrame,
    RegenerateFrame,
    ResendFullFrame,
    ResumeFrame,
    SendFrame,
    StopFrame,
    TemplatesChangedFrame,
)
from chatapp.realtime.watching import SocketWatching
from chatapp.unavailable import database_unavailable

logger = logging.getLogger(__name__)

_BUSY_HERE = "An answer is still streaming; stop it first."
_Start = Callable[[], Awaitable[runs.Started | Refused]]  # admits a run and stores its turn


class ChatConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels is untyped
    watching: SocketWatching
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
        self.watching = SocketWatching(
            layer=self.channel_layer,
            channel_name=self.channel_name,
            user=user,
            send=self._send_frame,
        )
        self.budget = FrameBudget.from_settings()
        await self.channel_layer.group_add(TEMPLATES_GROUP, self.channel_name)
        await self.accept()
        self.watchdog = asyncio.create_task(self.watching.watchdog_loop())

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(TEMPLATES_GROUP, self.channel_name)
        if self.watchdog is not None:
            self.watchdog.cancel()
        watching = getattr(self, "watching", None)
        if watching is not None:
            await watching.detach_all()

    # ---- browser -> server -------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        self._received_at = time.monotonic()
        if await self._over_budget(FRAME):
            return
        received = frame_read(text_data, max_bytes=settings.CHAT_MAX_FRAME_BYTES)
        if isinstance(received, Refusal):
            await self._error(received.code, received.message, client_id=received.client_id)
            return
        frame, self._frame_bytes = received.frame, received.size_bytes
        try:
            if isinstance(frame, SendFrame):
                await self._on_send(frame)
            elif isinstance(frame, StopFrame):
                await self._on_stop(frame)
            elif isinstance(frame, RegenerateFrame):
                await self._on_regenerate(frame)
            elif isinstance(frame, ResumeFrame):
                if not await self._over_budget(RESUME, client_id=frame.id):
                    await self._on_resume(frame)
            elif isinstance(frame, EditFrame):
                await self._on_edit(frame)
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
                    "unavailable",
                    unavailable.MESSAGE,
                    client_id=frame.id,
                    retry_after_s=unavailable.retry_after_s(),
                )
                return
            logger.exception("chat frame %s failed", frame.type)
            await self._error(
                "internal",
                "Something went wrong on our side and nothing was stored. Please try again.",
                client_id=frame.id,
            )

    async def _on_send(self, frame: SendFrame) -> None:
        # A retried send (the same client id) gets the answer it started, never a second:
        # `send_run_start` checks in its one read; only where a refusal comes before that (an
        # answer streams here; admission refuses, in `_started`) is it looked up here.
        if self._generating():
            if not await self._shown_if_sent(frame.id):
                await self._error("busy", _BUSY_HERE, client_id=frame.id)
            return
        template_version = None
        text = frame.text
        if frame.template is not None:
            if frame.conversation_id is not None:
                await self._error(
                    "invalid", "A template can only start a new conversation.", client_id=frame.id
                )
                return
            try:
                resolved = await database_sync_to_async(templated_message_resolve)(
                    template_id=frame.template.id,
                    version=frame.template.version,
                    sha256=frame.template.sha256,
                    variables=frame.variables,
                    patch=frame.patch,
                    result_sha256=frame.result_sha256,
                    text=frame.text,
                )
            except ResendFull as resend:
                await self._send_frame(ResendFullFrame(id=frame.id, reason=resend.reason))
                return
            except ApplicationError as exc:
                await self._app_error(exc, client_id=frame.id)
                return
            text, template_version = resolved.text, resolved.version
        assert text is not None  # the frame schema requires text without a template
        if await self._refused_text(text, client_id=frame.id):
            return
        question = runs.NewQuestion(
            sender=self.scope["user"],
            conversation_id=frame.conversation_id,
            client_message_id=frame.id,
            text=text,
            template_version=template_version,
        )
        started = await self._started(
            lambda: runs.send_run_start(
                question=question,
                user_key=self._user_key(),
                watcher=self.channel_name,
                received_at=self._received_at,
            ),
            client_id=frame.id,
            retried_send=True,
        )
        if started is None:
            return
        if not started.repeated:
            metrics.request_frame(
                kind=_kind_of(frame), frame_bytes=self._frame_bytes, prompt_text=text
            )
        await self._run_show(started, client_id=frame.id, bypass_faq=False, queued=True)

    async def _on_regenerate(self, frame: RegenerateFrame) -> None:
        if self._generating():
            await self._error("busy", _BUSY_HERE, client_id=frame.id)
            return
        user = self.scope["user"]
        started = await self._started(
            self._admit_and_store(
                lambda run_id: services.answer_restart(
                    sender=user, message_id=frame.message_id, client_id=frame.id, run_id=run_id
                )
            ),
            client_id=frame.id,
            message_id=frame.message_id,
        )
        if started is not None:
            await self._run_show(started, client_id=frame.id, bypass_faq=frame.bypass_faq)

    async def _on_edit(self, frame: EditFrame) -> None:
        if self._generating():
            await self._error("busy", _BUSY_HERE, client_id=frame.id)
            return
        if await self._refused_text(frame.text, client_id=frame.id):
            return
        user = self.scope["user"]
        started = await self._started(
            self._admit_and_store(
                lambda run_id: services.turn_edit(
                    sender=user,
                    message_id=frame.message_id,
                    text=frame.text,
                    client_id=frame.id,
                    run_id=run_id,
                )
            ),
            client_id=frame.id,
            message_id=frame.message_id,
        )
        if started is None:
            return
        if not started.repeated:
            metrics.request_frame(
                kind="text", frame_bytes=self._frame_bytes, prompt_text=frame.text
            )
        await self._run_show(started, client_id=frame.id, bypass_faq=False)

    async def _over_budget(self, kind: str, *, client_id: uuid.UUID | None = None) -> bool:
        """Refuse a frame past the socket's budget (chatapp/realtime/frame_budget.py)."""
        retry_after = self.budget.take(kind=kind, now=time.monotonic())
        if retry_after is None:
            return False
        await self._error(
            "rate_limited",
            "Too many frames from this page; slow down.",
            client_id=client_id,
            retry_after_s=float(max(1, math.ceil(retry_after))),
        )
        return True

    async def _refused_text(self, text: str, *, client_id: uuid.UUID) -> bool:
        refusal = text_refusal(text, max_chars=settings.CHAT_MAX_MESSAGE_CHARS)
        if refusal is None:
            return False
        await self._error(refusal.code, refusal.message, client_id=client_id)
        return True

    async def _shown_if_sent(self, client_id: uuid.UUID) -> bool:
        """Show the answer a send with this client id already started, if there is one."""
        existing = await database_sync_to_async(services.turn_existing)(
            sender=self.scope["user"], client_message_id=client_id
        )
        if existing is None:
            return False
        await self._send_frame(_accepted(client_id, existing))
        await self.watching.follow(existing.assistant_message, after_seq=0, client_id=client_id)
        return True

    def _admit_and_store(self, write: runs.TurnWrite) -> _Start:
        def start() -> Awaitable[runs.Started | Refused]:
            return runs.run_admit_and_store(
                user_key=self._user_key(),
                write=write,
                received_at=self._received_at,
                with_context=True,
            )

        return start

    async def _started(
        self,
        start: _Start,
        *,
        client_id: uuid.UUID,
        message_id: uuid.UUID | None = None,
        retried_send: bool = False,
    ) -> runs.Started | None:
        """Admit a new run and store its turn; None (the user told why) if either is refused.
        `retried_send`: the frame may repeat a send whose answer exists; refused admission
        then shows that answer instead."""
        try:
            started = await start()
        except ApplicationError as exc:
            await self._app_error(exc, client_id=client_id, message_id=message_id)
            return None
        if isinstance(started, Refused):
            if retried_send and await self._shown_if_sent(client_id):
                return None
            code: ErrorCode = (
                "no_worker"
                if started.reason == "no_worker"
                else "rate_limited"
                if started.reason == "rate_limited"
                else "busy"
            )
            metrics.error_sent(code=code)
            await self._send_frame(
                ErrorFrame(
                    id=client_id,
                    code=code,
                    message=started.message,
                    retry_after_s=started.retry_after_s,
                )
            )
            return None
        return started

    async def _run_show(
        self,
        started: runs.Started,
        *,
        client_id: uuid.UUID,
        bypass_faq: bool,
        queued: bool = False,
    ) -> None:
        """Start the answer (or follow the first frame's), and tell the browser where it goes.

        Queued first: the browser needs `chat.accepted` before the answer's entries, and
        those are handled only once this frame is (a consumer handles one message at a time).
        """
        if started.repeated:
            await self._send_frame(_accepted(client_id, started.turn))
            await self.watching.follow(
                started.turn.assistant_message, after_seq=0, client_id=client_id
            )
            return
        self.watching.started(
            RunWatch(
                message_id=started.turn.assistant_message.id,
                run_id=started.run_id,
                owner=started.runtime.relay.channel,
                client_id=client_id,
                clock=started.clock,
            )
        )
        try:
            if not queued:  # a send's request went out before its turn was stored
                await runs.chat_run_start(
                    started=started,
                    user_key=self._user_key(),
                    watcher=self.channel_name,
                    bypass_faq=bypass_faq,
                )
        finally:  # the turn is stored: the browser shows it, however its answer goes
            await self._send_frame(_accepted(client_id, started.turn))

    async def _on_resume(self, frame: ResumeFrame) -> None:
        message = await database_sync_to_async(selectors.answer_get)(
            owner=self.scope["user"], message_id=frame.message_id
        )
        if message is None:
            await self._error(
                "not_found",
                "No such answer in your conversations.",
                client_id=frame.id,
                message_id=frame.message_id,
            )
            return
        await self.watching.follow(message, after_seq=frame.last_seq, client_id=frame.id)

    async def _on_stop(self, frame: StopFrame) -> None:
        if not await self.watching.stop(frame.message_id):
            await self._error(
                "not_found",
                "Nothing is streaming here to stop.",
                client_id=frame.id,
                message_id=frame.message_id,
            )

    async def _on_feedback(self, frame: FeedbackFrame) -> None:
        try:
            await database_sync_to_async(services.message_feedback)(
                sender=self.scope["user"], message_id=frame.message_id, rating=frame.rating
            )
        except ApplicationError as exc:
            await self._app_error(exc, client_id=frame.id, message_id=frame.message_id)
            return
        await self._send_frame(
            FeedbackRecordedFrame(id=frame.id, message_id=frame.message_id, rating=frame.rating)
        )

    async def _on_draft(self, frame: DraftFrame) -> None:
        """Typing prefill (`runs.draft_prefill`): no reply unless it is refused. Nothing while
        an answer streams here: the engine is busy with this user's answer already."""
        if self._generating() or not settings.CHAT_TYPING_PREFILL:
            return
        if self.budget.take(kind=DRAFT, now=time.monotonic()) is not None:
            return  # past the socket's draft budget: a hint dropped, nothing lost
        if await self._refused_text(frame.text, client_id=frame.id):
            return
        try:
            await runs.draft_prefill(
                sender=self.scope["user"],
                conversation_id=frame.conversation_id,
                text=frame.text,
                template=None
                if frame.template is None
                else runs.TemplateKey(id=frame.template.id, version=frame.template.version),
            )
        except ApplicationError as exc:
            await self._app_error(exc, client_id=frame.id)

    async def _on_client_timing(self, frame: ClientTimingFrame) -> None:
        """The browser's time to first token of one of the user's answers: stored once,
        observed once. No reply unless it is refused."""
        try:
            await database_sync_to_async(services.answer_client_ttft_record)(
                sender=self.scope["user"], message_id=frame.message_id, ttft_ms=frame.ttft_ms
            )
        except ApplicationError as exc:
            await self._app_error(exc, client_id=frame.id, message_id=frame.message_id)
            return
        metrics.client_ttft(ttft_ms=frame.ttft_ms)

    # ---- relay -> socket (channel layer handlers) ---------------------------------------

    async def answer_entry(self, event: dict[str, Any]) -> None:
        await self.watching.on_entry(event)

    async def answer_started(self, event: dict[str, Any]) -> None:
        await self.watching.on_started(event)

    async def answer_alive(self, event: dict[str, Any]) -> None:
        self.watching.on_alive(event)

    async def answer_gone(self, event: dict[str, Any]) -> None:
        await self.watching.on_gone(event)

    async def chat_watchdog(self, event: dict[str, Any]) -> None:
        await self.watching.on_watchdog()

    async def templates_changed(self, event: dict[str, Any]) -> None:
        await self._send_frame(TemplatesChangedFrame(etag=str(event.get("etag", ""))))

    # ---- helpers -------------------------------------------------------------------------

    def _generating(self) -> bool:
        return self.watching.busy

    def _user_key(self) -> str:
        return str(self.scope["user"].pk)

    async def _send_frame(self, frame: AnyServerFrame) -> None:
        await self.send(text_data=frame.to_json())

    async def _app_error(
        self,
        exc: ApplicationError,
        *,
        client_id: uuid.UUID | None = None,
        message_id: uuid.UUID | None = None,
    ) -> None:
        code: ErrorCode = exc.code if exc.code in ERROR_CODES else "invalid"  # type: ignore[assignment]
        await self._error(code, exc.message, client_id=client_id, message_id=message_id)

    async def _error(
        self,
        code: ErrorCode,
        message: str,
        *,
        client_id: uuid.UUID | None = None,
        message_id: uuid.UUID | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        """Refuse a client frame (counted in chat:errors_total)."""
        metrics.error_sent(code=code)
        await self._send_frame(
            ErrorFrame(
                id=client_id,
                message_id=message_id,
                code=code,
                message=message,
                retry_after_s=retry_after_s,
            )
        )


def _accepted(client_id: uuid.UUID, turn: services.TurnStart) -> AcceptedFrame:
    return AcceptedFrame(
        id=client_id,
        conversation_id=turn.conversation.id,
        user_message_id=turn.user_message.id,
        assistant_message_id=turn.assistant_message.id,
    )


def _kind_of(frame: SendFrame) -> metrics.FrameKind:
    """How the frame carried the text: a patch, a bare template reference, or the text."""
    if frame.patch is not None:
        return "patch"
    return "text" if frame.text is not None else "template"
