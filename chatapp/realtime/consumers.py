"""The chat WebSocket: validates frames, hands work to the inference worker, relays deltas.

A consumer handles one message at a time, so generation never runs here: `receive()` stores
the user's message, sends one request to the worker's channel and returns. The worker streams
coalesced deltas to this consumer's channel; each one becomes a `chat.delta` frame. The answer
is written to the database once, when it ends.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from pydantic import ValidationError

from chatapp.conversations import selectors, services
from chatapp.conversations.models import Message
from chatapp.errors import ApplicationError
from chatapp.prompts.events import TEMPLATES_GROUP
from chatapp.prompts.resolution import ResendFull, templated_message_resolve
from chatapp.realtime.schemas import (
    CLIENT_FRAME_TYPES,
    ERROR_CODES,
    AcceptedFrame,
    AnyServerFrame,
    DeltaFrame,
    DoneFrame,
    ErrorCode,
    ErrorFrame,
    FeedbackFrame,
    FeedbackRecordedFrame,
    RegenerateFrame,
    ResendFullFrame,
    SendFrame,
    StopFrame,
    TemplatesChangedFrame,
    Timings,
    Usage,
    client_frame_adapter,
    client_id_of,
)
from inference.faq.index import GLOBAL_SCOPE, template_scope
from inference.protocol import (
    REQUEST_CHANNEL,
    Accepted,
    CancelRequest,
    ChatTurn,
    Delta,
    Done,
    Error,
    FaqLookup,
    GenerateRequest,
    Heartbeat,
    SamplingOptions,
)

logger = logging.getLogger(__name__)


@dataclass
class _Answer:
    """The answer streaming on this socket (at most one)."""

    client_id: uuid.UUID
    message_id: uuid.UUID
    request_id: str
    parts: list[str] = field(default_factory=list)
    next_seq: int = 1
    worker_channel: str | None = None
    stop_requested: bool = False
    watchdog: asyncio.Task[None] | None = None
    # when the worker last showed it is alive (accepted, delta or heartbeat), monotonic
    last_event: float = field(default_factory=time.monotonic)

    @property
    def text(self) -> str:
        return "".join(self.parts)


class ChatConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels is untyped
    answer: _Answer | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        await self.channel_layer.group_add(TEMPLATES_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(TEMPLATES_GROUP, self.channel_name)
        answer = self.answer
        if answer is None:
            return
        self.answer = None
        # Nobody is reading any more: stop the engine and keep what was said so far.
        await self._cancel_upstream(answer)
        await self._finish(
            answer,
            services.AnswerOutcome(
                status=Message.Status.STOPPED,
                finish_reason="abort",
                error_code="client_disconnected",
            ),
        )

    # ---- browser -> server -------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if text_data is None:
            await self._error("invalid", "Send JSON text frames, not binary.")
            return
        if len(text_data.encode()) > settings.CHAT_MAX_FRAME_BYTES:
            await self._error(
                "too_large", f"Frame is larger than {settings.CHAT_MAX_FRAME_BYTES} bytes."
            )
            return
        try:
            raw = json.loads(text_data)
        except ValueError:
            await self._error("bad_json", "Frame is not valid JSON.")
            return
        client_id = client_id_of(raw)
        if not isinstance(raw, dict) or raw.get("type") not in CLIENT_FRAME_TYPES:
            kind = raw.get("type") if isinstance(raw, dict) else None
            await self._error("unknown_type", f"Unknown frame type {kind!r}.", client_id=client_id)
            return
        try:
            frame = client_frame_adapter.validate_python(raw)
        except ValidationError as exc:
            await self._error("invalid", _describe(exc), client_id=client_id)
            return
        if isinstance(frame, SendFrame):
            await self._on_send(frame)
        elif isinstance(frame, StopFrame):
            await self._on_stop(frame)
        elif isinstance(frame, RegenerateFrame):
            await self._on_regenerate(frame)
        else:
            await self._on_feedback(frame)

    async def _on_send(self, frame: SendFrame) -> None:
        if self.answer is not None:
            await self._error(
                "busy", "An answer is still streaming; stop it first.", client_id=frame.id
            )
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
        if len(text) > settings.CHAT_MAX_MESSAGE_CHARS:
            await self._error(
                "too_large",
                f"Messages are limited to {settings.CHAT_MAX_MESSAGE_CHARS} characters.",
                client_id=frame.id,
            )
            return
        try:
            turn = await database_sync_to_async(services.turn_start)(
                sender=self.scope["user"],
                conversation_id=frame.conversation_id,
                client_message_id=frame.id,
                text=text,
                template_version=template_version,
            )
        except ApplicationError as exc:
            await self._app_error(exc, client_id=frame.id)
            return
        await self._send_frame(
            AcceptedFrame(
                id=frame.id,
                conversation_id=turn.conversation.id,
                user_message_id=turn.user_message.id,
                assistant_message_id=turn.assistant_message.id,
            )
        )
        if not turn.created:
            await self._replay_existing(frame.id, turn.assistant_message)
            return
        await self._generate(turn, client_id=frame.id, bypass_faq=False)

    async def _generate(
        self, turn: services.TurnStart, *, client_id: uuid.UUID, bypass_faq: bool
    ) -> None:
        context = await database_sync_to_async(selectors.generation_context)(
            conversation_id=turn.conversation.id,
            up_to=turn.user_message,
            max_turns=settings.CHAT_HISTORY_TURNS,
        )
        scopes = [GLOBAL_SCOPE]
        if context.template_id is not None:
            scopes.append(template_scope(context.template_id))
        answer = _Answer(
            client_id=client_id,
            message_id=turn.assistant_message.id,
            # fresh per generation: late events of an earlier (stopped) run never match
            request_id=str(uuid.uuid4()),
        )
        request = GenerateRequest(
            request_id=answer.request_id,
            reply_channel=self.channel_name,
            system=context.system_prompt,
            messages=[
                ChatTurn(role="user" if t.role == "user" else "assistant", content=t.content)
                for t in context.turns
            ],
            sampling=SamplingOptions.model_validate(
                {
                    **context.sampling,
                    "max_tokens": settings.CHAT_MAX_TOKENS or context.sampling.get("max_tokens"),
                }
            ),
            submitted_at=time.time(),
            faq_lookup=FaqLookup(scopes=scopes)
            if context.standalone and not bypass_faq and settings.CHAT_FAQ_ENABLED
            else None,
        )
        self.answer = answer
        answer.watchdog = asyncio.create_task(self._watch(answer.request_id))
        await self.channel_layer.send(REQUEST_CHANNEL, request.to_channel())

    async def _on_regenerate(self, frame: RegenerateFrame) -> None:
        if self.answer is not None:
            await self._error(
                "busy", "An answer is still streaming; stop it first.", client_id=frame.id
            )
            return
        try:
            turn = await database_sync_to_async(services.answer_restart)(
                sender=self.scope["user"], message_id=frame.message_id
            )
        except ApplicationError as exc:
            await self._app_error(exc, client_id=frame.id, message_id=frame.message_id)
            return
        await self._send_frame(
            AcceptedFrame(
                id=frame.id,
                conversation_id=turn.conversation.id,
                user_message_id=turn.user_message.id,
                assistant_message_id=turn.assistant_message.id,
            )
        )
        await self._generate(turn, client_id=frame.id, bypass_faq=frame.bypass_faq)

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

    async def _replay_existing(self, client_id: uuid.UUID, message: Message) -> None:
        """A retried send: report the stored answer instead of generating a second one."""
        if message.status == Message.Status.STREAMING:
            await self._error(
                "busy",
                "This message is still being answered elsewhere.",
                client_id=client_id,
                message_id=message.id,
            )
            return
        if message.status == Message.Status.FAILED:
            await self._error(
                "engine",
                "This message failed earlier; send it again as new.",
                client_id=client_id,
                message_id=message.id,
            )
            return
        if message.content:
            await self._send_frame(DeltaFrame(message_id=message.id, seq=1, text=message.content))
        await self._send_frame(_done_frame(message))

    async def _on_stop(self, frame: StopFrame) -> None:
        answer = self.answer
        if answer is None or (
            frame.message_id is not None and frame.message_id != answer.message_id
        ):
            await self._error(
                "not_found",
                "Nothing is streaming here to stop.",
                client_id=frame.id,
                message_id=frame.message_id,
            )
            return
        answer.stop_requested = True
        await self._cancel_upstream(answer)  # the worker answers with a final `done` (abort)

    # ---- worker -> server (channel layer handlers) ---------------------------------------

    async def inference_accepted(self, event: dict[str, Any]) -> None:
        accepted = Accepted.model_validate(event)
        answer = self._current(accepted.request_id)
        if answer is None:  # we gave up on it (timeout/disconnect): free the engine
            await self.channel_layer.send(
                accepted.worker_channel, CancelRequest(request_id=accepted.request_id).to_channel()
            )
            return
        answer.worker_channel = accepted.worker_channel
        answer.last_event = time.monotonic()
        if answer.stop_requested:
            await self._cancel_upstream(answer)

    async def inference_heartbeat(self, event: dict[str, Any]) -> None:
        answer = self._current(Heartbeat.model_validate(event).request_id)
        if answer is not None:
            answer.last_event = time.monotonic()

    async def inference_delta(self, event: dict[str, Any]) -> None:
        delta = Delta.model_validate(event)
        answer = self._current(delta.request_id)
        if answer is None:
            return
        if delta.seq != answer.next_seq:
            logger.warning(
                "answer %s: expected seq %d, got %d", answer.request_id, answer.next_seq, delta.seq
            )
        answer.next_seq = delta.seq + 1
        answer.last_event = time.monotonic()
        answer.parts.append(delta.text)
        await self._send_frame(
            DeltaFrame(message_id=answer.message_id, seq=delta.seq, text=delta.text)
        )

    async def inference_done(self, event: dict[str, Any]) -> None:
        done = Done.model_validate(event)
        answer = self._current(done.request_id)
        if answer is None:
            return
        self.answer = None
        outcome = services.AnswerOutcome(
            status=Message.Status.STOPPED
            if done.finish_reason == "abort"
            else Message.Status.COMPLETE,
            finish_reason=done.finish_reason,
            prompt_tokens=done.prompt_tokens,
            completion_tokens=done.completion_tokens,
            cached_prompt_tokens=done.cached_prompt_tokens,
            queue_wait_ms=done.queue_wait_ms,
            ttft_ms=done.ttft_ms,
            total_ms=done.total_ms,
            source=done.source,
            faq_entry_id=done.faq_entry_id,
        )
        await self._finish(answer, outcome)
        await self._send_frame(
            DoneFrame(
                message_id=answer.message_id,
                status="stopped" if outcome.status == Message.Status.STOPPED else "complete",
                finish_reason=done.finish_reason,
                usage=Usage(
                    prompt_tokens=done.prompt_tokens,
                    completion_tokens=done.completion_tokens,
                    cached_prompt_tokens=done.cached_prompt_tokens,
                ),
                timings=Timings(
                    queue_wait_ms=done.queue_wait_ms, ttft_ms=done.ttft_ms, total_ms=done.total_ms
                ),
                source=done.source,
                faq_entry_id=done.faq_entry_id,
            )
        )

    async def inference_error(self, event: dict[str, Any]) -> None:
        error = Error.model_validate(event)
        answer = self._current(error.request_id)
        if answer is None:
            return
        self.answer = None
        await self._finish(
            answer,
            services.AnswerOutcome(
                status=Message.Status.FAILED,
                error_code=error.code,
            ),
        )
        await self._error(
            "engine", error.message, client_id=answer.client_id, message_id=answer.message_id
        )

    async def templates_changed(self, event: dict[str, Any]) -> None:
        await self._send_frame(TemplatesChangedFrame(etag=str(event.get("etag", ""))))

    async def chat_watchdog(self, event: dict[str, Any]) -> None:
        """Fail an answer whose worker went silent, so nothing spins forever."""
        answer = self._current(str(event.get("request_id")))
        if answer is None:
            return
        silence = time.monotonic() - answer.last_event
        if answer.worker_channel is None and silence >= settings.CHAT_ACCEPT_TIMEOUT_S:
            code: ErrorCode = "no_worker"
            text = "No inference worker is available right now. Please try again in a moment."
        elif answer.worker_channel is not None and silence >= settings.CHAT_STALL_TIMEOUT_S:
            code = "worker_lost"
            text = (
                "The assistant stopped responding (its worker was lost). What it wrote so "
                "far is kept; please ask again."
            )
            await self._cancel_upstream(answer)  # in case it is alive but cut off
        else:
            return
        self.answer = None
        await self._finish(
            answer, services.AnswerOutcome(status=Message.Status.FAILED, error_code=code)
        )
        await self._error(code, text, client_id=answer.client_id, message_id=answer.message_id)

    # ---- helpers -------------------------------------------------------------------------

    def _current(self, request_id: str) -> _Answer | None:
        answer = self.answer
        return answer if answer is not None and answer.request_id == request_id else None

    async def _watch(self, request_id: str) -> None:
        # Runs beside the consumer and reports through the consumer's own channel, so the
        # check is handled in order with the worker's events.
        interval = min(settings.CHAT_ACCEPT_TIMEOUT_S, settings.CHAT_STALL_TIMEOUT_S) / 3
        while True:
            await asyncio.sleep(interval)
            await self.channel_layer.send(
                self.channel_name, {"type": "chat.watchdog", "request_id": request_id}
            )

    async def _cancel_upstream(self, answer: _Answer) -> None:
        if answer.worker_channel is not None:
            await self.channel_layer.send(
                answer.worker_channel, CancelRequest(request_id=answer.request_id).to_channel()
            )

    async def _finish(self, answer: _Answer, outcome: services.AnswerOutcome) -> None:
        if answer.watchdog is not None:
            answer.watchdog.cancel()
        await database_sync_to_async(services.answer_finish)(
            message_id=answer.message_id, content=answer.text, outcome=outcome
        )

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
    ) -> None:
        await self._send_frame(
            ErrorFrame(id=client_id, message_id=message_id, code=code, message=message)
        )


def _done_frame(message: Message) -> DoneFrame:
    return DoneFrame(
        message_id=message.id,
        status="stopped" if message.status == Message.Status.STOPPED else "complete",
        finish_reason=message.finish_reason or "stop",
        usage=Usage(
            prompt_tokens=message.prompt_tokens,
            completion_tokens=message.completion_tokens,
            cached_prompt_tokens=message.cached_prompt_tokens,
        ),
        timings=Timings(
            queue_wait_ms=message.queue_wait_ms, ttft_ms=message.ttft_ms, total_ms=message.total_ms
        ),
        source="faq" if message.source == "faq" else "model",
        faq_entry_id=message.faq_entry_id,
    )


def _describe(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "frame"
    return f"Invalid {where}: {first['msg']}."
