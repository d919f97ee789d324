"""The chat WebSocket: validates frames, admits work, shows answers as they are generated.

A consumer handles one frame at a time, so generation never runs here. A send is admitted
(limits in `chatapp.admission`), stored, and handed to this process's answer relay, which owns
the answer from then on: a socket only *watches* answers. Entries reach the socket with their
`seq`; a socket that reconnects (to any web process) sends `chat.resume` with the last seq it
has and gets exactly the rest, then the live ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from pydantic import ValidationError

from chatapp import unavailable
from chatapp.admission.limiter import Refused
from chatapp.answers.entries import LogEntry, LoggedDelta, LoggedEnd
from chatapp.answers.log import Ownership
from chatapp.answers.messages import (
    AnswerAlive,
    AnswerEntry,
    AnswerGone,
    AttachAnswer,
    DetachAnswer,
    StopAnswer,
)
from chatapp.answers.recovery import answer_abandon
from chatapp.answers.runtime import AnswerRuntime, answer_runtime
from chatapp.conversations import selectors, services
from chatapp.conversations.models import Message
from chatapp.errors import ApplicationError
from chatapp.metrics import recording as metrics
from chatapp.prompts.events import TEMPLATES_GROUP
from chatapp.prompts.resolution import ResendFull, templated_message_resolve
from chatapp.realtime.schemas import (
    CLIENT_FRAME_TYPES,
    ERROR_CODES,
    AcceptedFrame,
    AnyServerFrame,
    ClientTimingFrame,
    DeltaFrame,
    DoneFrame,
    EditFrame,
    ErrorCode,
    ErrorFrame,
    FeedbackFrame,
    FeedbackRecordedFrame,
    RegenerateFrame,
    ResendFullFrame,
    ResumeFrame,
    SendFrame,
    SnapshotFrame,
    StopFrame,
    TemplatesChangedFrame,
    Timings,
    Usage,
    client_frame_adapter,
    client_id_of,
)
from chatapp.unavailable import database_unavailable
from inference.faq.index import GLOBAL_SCOPE, template_scope
from inference.protocol import (
    REQUEST_CHANNEL,
    ChatTurn,
    FaqLookup,
    GenerateRequest,
    SamplingOptions,
)

logger = logging.getLogger(__name__)

_BUSY_HERE = "An answer is still streaming; stop it first."


@dataclass
class _Watch:
    """An answer this socket shows while it is generated."""

    next_seq: int  # the next seq the browser needs
    owner: str  # the channel of the relay that owns the answer
    client_id: uuid.UUID | None  # the frame that asked for it, echoed on errors
    last_heard: float = field(default_factory=time.monotonic)
    resyncing: bool = False  # a gap was seen; the owner is replaying from next_seq


class ChatConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels is untyped
    watching: dict[uuid.UUID, _Watch]
    _frame_bytes = 0  # size of the frame being handled, as received
    watchdog: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.watching = {}
        await self.channel_layer.group_add(TEMPLATES_GROUP, self.channel_name)
        await self.accept()
        self.watchdog = asyncio.create_task(self._watch_owners())

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(TEMPLATES_GROUP, self.channel_name)
        if self.watchdog is not None:
            self.watchdog.cancel()
        # The answers go on without us for the grace period, so a refresh can resume them.
        for message_id, watch in getattr(self, "watching", {}).items():
            with contextlib.suppress(Exception):
                await self.channel_layer.send(
                    watch.owner,
                    DetachAnswer(message_id=message_id, watcher=self.channel_name).to_channel(),
                )
        self.watching = {}

    # ---- browser -> server -------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if text_data is None:
            await self._error("invalid", "Send JSON text frames, not binary.")
            return
        self._frame_bytes = len(text_data.encode(errors="surrogatepass"))
        if self._frame_bytes > settings.CHAT_MAX_FRAME_BYTES:
            await self._error(
                "too_large", f"Frame is larger than {settings.CHAT_MAX_FRAME_BYTES} bytes."
            )
            return
        try:
            raw = json.loads(text_data)
        except (ValueError, RecursionError):
            await self._error("bad_json", "Frame is not valid JSON.")
            return
        client_id = client_id_of(raw)
        try:  # JSON escapes can smuggle in lone surrogates ("\ud800"): no text may hold them
            json.dumps(raw, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            await self._error(
                "invalid", "Frame text is not valid Unicode (lone surrogate).", client_id=client_id
            )
            return
        kind = raw.get("type") if isinstance(raw, dict) else None
        if not isinstance(kind, str) or kind not in CLIENT_FRAME_TYPES:
            await self._error(
                "unknown_type", f"Unknown frame type {str(kind)[:40]!r}.", client_id=client_id
            )
            return
        try:
            frame = client_frame_adapter.validate_python(raw)
        except ValidationError as exc:
            await self._error("invalid", _describe(exc), client_id=client_id)
            return
        try:
            if isinstance(frame, SendFrame):
                await self._on_send(frame)
            elif isinstance(frame, StopFrame):
                await self._on_stop(frame)
            elif isinstance(frame, RegenerateFrame):
                await self._on_regenerate(frame)
            elif isinstance(frame, ResumeFrame):
                await self._on_resume(frame)
            elif isinstance(frame, EditFrame):
                await self._on_edit(frame)
            elif isinstance(frame, ClientTimingFrame):
                await self._on_client_timing(frame)
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
        existing = await database_sync_to_async(services.turn_existing)(
            sender=self.scope["user"], client_message_id=frame.id
        )
        if existing is not None:  # a retried send: show the answer it started, never a second
            await self._send_frame(_accepted(frame.id, existing))
            await self._follow(existing.assistant_message, after_seq=0, client_id=frame.id)
            return
        if self._generating():
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
        if await self._too_long(text, client_id=frame.id):
            return
        admitted = await self._admitted_write(
            functools.partial(
                services.turn_start,
                sender=self.scope["user"],
                conversation_id=frame.conversation_id,
                client_message_id=frame.id,
                text=text,
                template_version=template_version,
            ),
            client_id=frame.id,
        )
        if admitted is None:
            return
        runtime, request_id, turn = admitted
        metrics.request_frame(kind=_kind_of(frame), frame_bytes=self._frame_bytes, prompt_text=text)
        await self._send_frame(_accepted(frame.id, turn))
        if not turn.created:  # a concurrent retry with this id won the race
            await self._release(runtime, request_id)
            await self._follow(turn.assistant_message, after_seq=0, client_id=frame.id)
            return
        await self._generate(
            runtime, turn, request_id=request_id, client_id=frame.id, bypass_faq=False
        )

    async def _on_regenerate(self, frame: RegenerateFrame) -> None:
        if self._generating():
            await self._error("busy", _BUSY_HERE, client_id=frame.id)
            return
        admitted = await self._admitted_write(
            functools.partial(
                services.answer_restart, sender=self.scope["user"], message_id=frame.message_id
            ),
            client_id=frame.id,
            message_id=frame.message_id,
        )
        if admitted is None:
            return
        runtime, request_id, turn = admitted
        await self._send_frame(_accepted(frame.id, turn))
        await self._generate(
            runtime, turn, request_id=request_id, client_id=frame.id, bypass_faq=frame.bypass_faq
        )

    async def _on_edit(self, frame: EditFrame) -> None:
        if self._generating():
            await self._error("busy", _BUSY_HERE, client_id=frame.id)
            return
        if await self._too_long(frame.text, client_id=frame.id):
            return
        admitted = await self._admitted_write(
            functools.partial(
                services.turn_edit,
                sender=self.scope["user"],
                message_id=frame.message_id,
                text=frame.text,
            ),
            client_id=frame.id,
            message_id=frame.message_id,
        )
        if admitted is None:
            return
        runtime, request_id, turn = admitted
        metrics.request_frame(kind="text", frame_bytes=self._frame_bytes, prompt_text=frame.text)
        await self._send_frame(_accepted(frame.id, turn))
        await self._generate(
            runtime, turn, request_id=request_id, client_id=frame.id, bypass_faq=False
        )

    async def _too_long(self, text: str, *, client_id: uuid.UUID) -> bool:
        if len(text) <= settings.CHAT_MAX_MESSAGE_CHARS:
            return False
        await self._error(
            "too_large",
            f"Messages are limited to {settings.CHAT_MAX_MESSAGE_CHARS} characters.",
            client_id=client_id,
        )
        return True

    async def _admitted_write(
        self,
        write: Callable[[], services.TurnStart],
        *,
        client_id: uuid.UUID,
        message_id: uuid.UUID | None = None,
    ) -> tuple[AnswerRuntime, str, services.TurnStart] | None:
        """Admit a new generation, then store its turn; None (the user told why) if either
        is refused. A failed write gives the admission slot back: nothing half-done stays."""
        runtime = await answer_runtime()
        request_id = await self._admit(runtime, client_id=client_id)
        if request_id is None:
            return None
        try:
            turn = await database_sync_to_async(write)()
        except BaseException as exc:
            await self._release(runtime, request_id)
            if not isinstance(exc, ApplicationError):
                raise
            await self._app_error(exc, client_id=client_id, message_id=message_id)
            return None
        return runtime, request_id, turn

    async def _admit(self, runtime: AnswerRuntime, *, client_id: uuid.UUID) -> str | None:
        """Take an admission slot for a new generation; on refusal tell the browser why."""
        request_id = str(uuid.uuid4())
        decision = await runtime.admission.acquire(
            request_id=request_id,
            user_key=self._user_key(),
            capacity=await runtime.registry.capacity(),
        )
        if isinstance(decision, Refused):
            code: ErrorCode = (
                "no_worker"
                if decision.reason == "no_worker"
                else "rate_limited"
                if decision.reason == "rate_limited"
                else "busy"
            )
            metrics.error_sent(code=code)
            await self._send_frame(
                ErrorFrame(
                    id=client_id,
                    code=code,
                    message=decision.message,
                    retry_after_s=decision.retry_after_s,
                )
            )
            return None
        return request_id

    async def _release(self, runtime: AnswerRuntime, request_id: str) -> None:
        with contextlib.suppress(Exception):
            await runtime.admission.release(request_id=request_id, user_key=self._user_key())

    async def _generate(
        self,
        runtime: AnswerRuntime,
        turn: services.TurnStart,
        *,
        request_id: str,
        client_id: uuid.UUID,
        bypass_faq: bool,
    ) -> None:
        try:
            context = await database_sync_to_async(selectors.generation_context)(
                conversation_id=turn.conversation.id,
                up_to=turn.user_message,
                max_messages=settings.CHAT_HISTORY_MAX_MESSAGES,
            )
        except BaseException:
            await self._release(runtime, request_id)
            await database_sync_to_async(services.answer_finish)(
                message_id=turn.assistant_message.id,
                content="",
                outcome=services.AnswerOutcome(status=Message.Status.FAILED, error_code="internal"),
            )
            raise
        scopes = [GLOBAL_SCOPE]
        if context.template_id is not None:
            scopes.append(template_scope(context.template_id))
        relay = runtime.relay
        request = GenerateRequest(
            request_id=request_id,
            reply_channel=relay.channel,
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
        message_id = turn.assistant_message.id
        self.watching[message_id] = _Watch(next_seq=1, owner=relay.channel, client_id=client_id)
        await relay.start(
            message_id=message_id,
            user_key=self._user_key(),
            watcher=self.channel_name,
            request=request,
            request_channel=REQUEST_CHANNEL,
        )

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
        await self._follow(message, after_seq=frame.last_seq, client_id=frame.id)

    async def _follow(self, message: Message, *, after_seq: int, client_id: uuid.UUID) -> None:
        """Show an answer from `after_seq` on: live from its relay, or as it ended."""
        if message.id in self.watching:
            return  # this socket already shows it (a retry on the same socket)
        runtime = await answer_runtime()
        if message.status == Message.Status.STREAMING:
            owner = await self._owner_of(runtime, message)
            if owner is not None:
                self.watching[message.id] = _Watch(
                    next_seq=after_seq + 1, owner=owner.relay_channel, client_id=client_id
                )
                await self.channel_layer.send(
                    owner.relay_channel,
                    AttachAnswer(
                        message_id=message.id, watcher=self.channel_name, after_seq=after_seq
                    ).to_channel(),
                )
                return
            if message.status == Message.Status.STREAMING:
                # Still no owner on record: its web process died before it could log it.
                await answer_abandon(log=runtime.log, message_id=message.id)
                await database_sync_to_async(message.refresh_from_db)()
        await self._show_ended(message, after_seq=after_seq, client_id=client_id)

    async def _owner_of(self, runtime: AnswerRuntime, message: Message) -> Ownership | None:
        """The relay owning a streaming answer. Its record can be missing for a moment (Redis
        just restarted: the owner rewrites it every heartbeat), so look a few times."""
        for attempt in range(5):
            owner = await runtime.log.ownership(message_id=message.id)
            if owner is not None:
                return owner
            await database_sync_to_async(message.refresh_from_db)()
            if message.status != Message.Status.STREAMING or attempt == 4:
                return None
            await asyncio.sleep(settings.CHAT_RELAY_HEARTBEAT_S / 2)
        return None

    async def _show_ended(self, message: Message, *, after_seq: int, client_id: uuid.UUID) -> None:
        runtime = await answer_runtime()
        entries = await runtime.log.entries_after(message_id=message.id, seq=after_seq)
        if (
            entries
            and isinstance(entries[-1], LoggedEnd)
            and [e.seq for e in entries] == list(range(after_seq + 1, after_seq + 1 + len(entries)))
        ):
            for entry in entries:
                await self._show(message.id, entry, client_id=client_id)
            return
        # The log is gone (expired): the stored message is the truth; replace what is shown.
        await self._send_frame(SnapshotFrame(message_id=message.id, content=message.content))
        if message.status == Message.Status.FAILED:
            code = message.error_code if message.error_code in ERROR_CODES else "engine"
            await self._answer_failed(
                code,  # type: ignore[arg-type]
                "This answer failed; ask again to get a new one.",
                client_id=client_id,
                message_id=message.id,
            )
        else:
            await self._send_frame(_done_frame(message))

    async def _on_stop(self, frame: StopFrame) -> None:
        message_id = frame.message_id
        if message_id is None and len(self.watching) == 1:
            message_id = next(iter(self.watching))
        watch = self.watching.get(message_id) if message_id is not None else None
        owner = watch.owner if watch is not None else None
        if owner is None and message_id is not None:  # streaming in another tab: stop it too
            message = await database_sync_to_async(selectors.answer_get)(
                owner=self.scope["user"], message_id=message_id
            )
            if message is not None and message.status == Message.Status.STREAMING:
                runtime = await answer_runtime()
                ownership = await runtime.log.ownership(message_id=message_id)
                owner = ownership.relay_channel if ownership is not None else None
        if owner is None or message_id is None:
            await self._error(
                "not_found",
                "Nothing is streaming here to stop.",
                client_id=frame.id,
                message_id=frame.message_id,
            )
            return
        # The owner aborts the engine request; its `done` (stopped) comes back as an entry.
        await self.channel_layer.send(owner, StopAnswer(message_id=message_id).to_channel())

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
        message = AnswerEntry.model_validate(event)
        watch = self.watching.get(message.message_id)
        if watch is None:
            return
        watch.last_heard = time.monotonic()
        await self._show(message.message_id, message.entry, client_id=watch.client_id)

    async def answer_alive(self, event: dict[str, Any]) -> None:
        watch = self.watching.get(AnswerAlive.model_validate(event).message_id)
        if watch is not None:
            watch.last_heard = time.monotonic()

    async def answer_gone(self, event: dict[str, Any]) -> None:
        """We attached after the answer ended: show how it ended from the log."""
        message_id = AnswerGone.model_validate(event).message_id
        watch = self.watching.pop(message_id, None)
        if watch is None:
            return
        message = await database_sync_to_async(selectors.answer_get)(
            owner=self.scope["user"], message_id=message_id
        )
        if message is not None:
            await self._show_ended(
                message, after_seq=watch.next_seq - 1, client_id=watch.client_id or uuid.uuid4()
            )

    async def templates_changed(self, event: dict[str, Any]) -> None:
        await self._send_frame(TemplatesChangedFrame(etag=str(event.get("etag", ""))))

    async def chat_watchdog(self, event: dict[str, Any]) -> None:
        """An owner relay that went silent died with its web process: finish from the log."""
        limit = settings.CHAT_STALL_TIMEOUT_S + 2 * settings.CHAT_RELAY_HEARTBEAT_S
        now = time.monotonic()
        for message_id, watch in list(self.watching.items()):
            if now - watch.last_heard < limit:
                continue
            del self.watching[message_id]
            runtime = await answer_runtime()
            await answer_abandon(log=runtime.log, message_id=message_id)
            message = await database_sync_to_async(selectors.answer_get)(
                owner=self.scope["user"], message_id=message_id
            )
            if message is not None:
                await self._show_ended(
                    message, after_seq=watch.next_seq - 1, client_id=watch.client_id or uuid.uuid4()
                )

    # ---- helpers -------------------------------------------------------------------------

    async def _show(self, message_id: uuid.UUID, entry: LogEntry, *, client_id: Any) -> None:
        """Send one entry unless the browser has it already; entries arrive in seq order."""
        watch = self.watching.get(message_id)
        if watch is not None:
            if entry.seq < watch.next_seq:
                return  # replayed and live copies overlap: show once
            if entry.seq > watch.next_seq:
                # Something was lost on the way: show nothing out of order; ask the owner to
                # replay from the last entry shown (once; what it sends is in order).
                if not watch.resyncing:
                    watch.resyncing = True
                    await self.channel_layer.send(
                        watch.owner,
                        AttachAnswer(
                            message_id=message_id,
                            watcher=self.channel_name,
                            after_seq=watch.next_seq - 1,
                        ).to_channel(),
                    )
                return
            watch.resyncing = False
            watch.next_seq = entry.seq + 1
        if isinstance(entry, LoggedDelta):
            await self._send_frame(
                DeltaFrame(message_id=message_id, seq=entry.seq, text=entry.text)
            )
            return
        self.watching.pop(message_id, None)
        if entry.status == "failed":
            code = entry.error_code if entry.error_code in ERROR_CODES else "engine"
            await self._answer_failed(
                code,  # type: ignore[arg-type]
                entry.error_message or "The answer failed.",
                client_id=client_id,
                message_id=message_id,
            )
            return
        await self._send_frame(
            DoneFrame(
                message_id=message_id,
                status="stopped" if entry.status == "stopped" else "complete",
                finish_reason=entry.finish_reason,
                usage=Usage(
                    prompt_tokens=entry.prompt_tokens,
                    completion_tokens=entry.completion_tokens,
                    cached_prompt_tokens=entry.cached_prompt_tokens,
                ),
                timings=Timings(
                    queue_wait_ms=entry.queue_wait_ms,
                    ttft_ms=entry.ttft_ms,
                    total_ms=entry.total_ms,
                ),
                source=entry.source,
                faq_entry_id=entry.faq_entry_id,
            )
        )

    def _generating(self) -> bool:
        return bool(self.watching)

    def _user_key(self) -> str:
        return str(self.scope["user"].pk)

    async def _watch_owners(self) -> None:
        # Reports through the consumer's own channel, so checks run in order with entries.
        interval = max(0.2, settings.CHAT_RELAY_HEARTBEAT_S)
        while True:
            await asyncio.sleep(interval)
            if self.watching:
                try:
                    await self.channel_layer.send(self.channel_name, {"type": "chat.watchdog"})
                except Exception as exc:  # Redis restarting: the next round tries again
                    logger.warning("socket watchdog could not report: %s", exc)

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

    async def _answer_failed(
        self, code: ErrorCode, message: str, *, client_id: uuid.UUID | None, message_id: uuid.UUID
    ) -> None:
        """Show that an answer failed (counted once per answer by its relay, not here)."""
        await self._send_frame(
            ErrorFrame(id=client_id, message_id=message_id, code=code, message=message)
        )


def _accepted(client_id: uuid.UUID, turn: services.TurnStart) -> AcceptedFrame:
    return AcceptedFrame(
        id=client_id,
        conversation_id=turn.conversation.id,
        user_message_id=turn.user_message.id,
        assistant_message_id=turn.assistant_message.id,
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


def _kind_of(frame: SendFrame) -> metrics.FrameKind:
    """How the frame carried the text: a patch, a bare template reference, or the text."""
    if frame.patch is not None:
        return "patch"
    return "text" if frame.text is not None else "template"


def _describe(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "frame"
    return f"Invalid {where}: {first['msg']}."[:300]
