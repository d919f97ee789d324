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
import json
import logging
import uuid
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from pydantic import ValidationError

from chatapp import unavailable
from chatapp.admission.limiter import Refused
from chatapp.answers import runs
from chatapp.answers.entries import LogEntry, LoggedDelta, LoggedEnd
from chatapp.answers.follower import RunWatch, StoredAnswer, run_rest, silence_limit_s
from chatapp.answers.messages import (
    AnswerAlive,
    AnswerEntry,
    AnswerGone,
    DetachAnswer,
    StopAnswer,
)
from chatapp.answers.recovery import owner_state
from chatapp.answers.runtime import answer_runtime
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

logger = logging.getLogger(__name__)

_BUSY_HERE = "An answer is still streaming; stop it first."


class ChatConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]  # channels is untyped
    watching: dict[uuid.UUID, RunWatch]
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
        for watch in getattr(self, "watching", {}).values():
            with contextlib.suppress(Exception):
                await self.channel_layer.send(
                    watch.owner,
                    DetachAnswer(
                        message_id=watch.message_id, run_id=watch.run_id, watcher=self.channel_name
                    ).to_channel(),
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
        user = self.scope["user"]
        started = await self._started(
            lambda run_id: services.turn_start(
                sender=user,
                conversation_id=frame.conversation_id,
                client_message_id=frame.id,
                text=text,
                template_version=template_version,
                run_id=run_id,
            ),
            client_id=frame.id,
        )
        if started is None:
            return
        if not started.repeated:
            metrics.request_frame(
                kind=_kind_of(frame), frame_bytes=self._frame_bytes, prompt_text=text
            )
        await self._run_show(started, client_id=frame.id, bypass_faq=False)

    async def _on_regenerate(self, frame: RegenerateFrame) -> None:
        if self._generating():
            await self._error("busy", _BUSY_HERE, client_id=frame.id)
            return
        user = self.scope["user"]
        started = await self._started(
            lambda run_id: services.answer_restart(
                sender=user, message_id=frame.message_id, client_id=frame.id, run_id=run_id
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
        if await self._too_long(frame.text, client_id=frame.id):
            return
        user = self.scope["user"]
        started = await self._started(
            lambda run_id: services.turn_edit(
                sender=user,
                message_id=frame.message_id,
                text=frame.text,
                client_id=frame.id,
                run_id=run_id,
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

    async def _too_long(self, text: str, *, client_id: uuid.UUID) -> bool:
        if len(text) <= settings.CHAT_MAX_MESSAGE_CHARS:
            return False
        await self._error(
            "too_large",
            f"Messages are limited to {settings.CHAT_MAX_MESSAGE_CHARS} characters.",
            client_id=client_id,
        )
        return True

    async def _started(
        self,
        write: runs.TurnWrite,
        *,
        client_id: uuid.UUID,
        message_id: uuid.UUID | None = None,
    ) -> runs.Started | None:
        """Admit a new run and store its turn; None (the user told why) if either is refused."""
        try:
            started = await runs.run_admit_and_store(user_key=self._user_key(), write=write)
        except ApplicationError as exc:
            await self._app_error(exc, client_id=client_id, message_id=message_id)
            return None
        if isinstance(started, Refused):
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
        self, started: runs.Started, *, client_id: uuid.UUID, bypass_faq: bool
    ) -> None:
        """Tell the browser where the answer goes, then start it (or follow the first frame's)."""
        await self._send_frame(_accepted(client_id, started.turn))
        if started.repeated:
            await self._follow(started.turn.assistant_message, after_seq=0, client_id=client_id)
            return
        message_id = started.turn.assistant_message.id
        self.watching[message_id] = RunWatch(
            message_id=message_id,
            run_id=started.run_id,
            owner=started.runtime.relay.channel,
            client_id=client_id,
        )
        await runs.chat_run_start(
            started=started,
            user_key=self._user_key(),
            watcher=self.channel_name,
            bypass_faq=bypass_faq,
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
        """Show an answer from `after_seq` on: live from its owner, or as it ended."""
        if message.id in self.watching:
            return  # this socket already shows it (a retry on the same socket)
        if message.run_id is None:  # written before runs existed and long finished
            await self._show_stored(message, client_id=client_id)
            return
        watch = RunWatch(
            message_id=message.id,
            run_id=message.run_id,
            owner="",
            client_id=client_id,
            next_seq=after_seq + 1,
        )
        if message.status == Message.Status.STREAMING:
            runtime = await answer_runtime()
            owner = await runtime.log.ownership(run_id=message.run_id)
            if owner_state(owner, silent_after_s=settings.CHAT_REAP_AFTER_S) == "alive":
                assert owner is not None
                watch.owner = owner.relay_channel
                self.watching[message.id] = watch
                await self.channel_layer.send(
                    owner.relay_channel, watch.attach(watcher=self.channel_name).to_channel()
                )
                return
        await self._show_rest(watch)

    async def _show_rest(self, watch: RunWatch) -> None:
        """The run has ended, or its owner is silent: show how it ended (ending it if need be).
        Still running after all (its owner is alive): watch it from its owner again."""
        runtime = await answer_runtime()
        user = self.scope["user"]
        rest = await run_rest(
            orphans=runtime.relay.orphans,
            watch=watch,
            load_row=lambda: database_sync_to_async(selectors.answer_get)(
                owner=user, message_id=watch.message_id
            ),
        )
        if rest is None:
            owner = await runtime.log.ownership(run_id=watch.run_id)
            if owner is not None:
                watch.owner = owner.relay_channel
                watch.heard()
                self.watching[watch.message_id] = watch
                await self.channel_layer.send(
                    owner.relay_channel, watch.attach(watcher=self.channel_name).to_channel()
                )
                return
            rest = StoredAnswer(content="", end=LoggedEnd(seq=watch.next_seq, status="failed"))
        self.watching.pop(watch.message_id, None)
        if isinstance(rest, StoredAnswer):
            # The log is gone: the stored message is the truth; replace what is shown.
            await self._send_frame(SnapshotFrame(message_id=watch.message_id, content=rest.content))
            await self._show_end(watch.message_id, rest.end, client_id=watch.client_id)
            return
        self.watching[watch.message_id] = watch
        for entry in rest:
            await self._show(watch, entry)

    async def _show_stored(self, message: Message, *, client_id: uuid.UUID) -> None:
        await self._send_frame(SnapshotFrame(message_id=message.id, content=message.content))
        await self._show_end(
            message.id,
            LoggedEnd(
                seq=1,
                status="failed"
                if message.status == Message.Status.FAILED
                else ("stopped" if message.status == Message.Status.STOPPED else "complete"),
                finish_reason=message.finish_reason or "stop",
                error_code=message.error_code,
                error_message="This answer failed; ask again to get a new one.",
            ),
            client_id=client_id,
        )

    async def _on_stop(self, frame: StopFrame) -> None:
        message_id = frame.message_id
        if message_id is None and len(self.watching) == 1:
            message_id = next(iter(self.watching))
        watch = self.watching.get(message_id) if message_id is not None else None
        stop: tuple[str, StopAnswer] | None = None
        if watch is not None:
            stop = watch.owner, StopAnswer(message_id=watch.message_id, run_id=watch.run_id)
        elif message_id is not None:  # streaming in another tab: stop it too
            message = await database_sync_to_async(selectors.answer_get)(
                owner=self.scope["user"], message_id=message_id
            )
            if (
                message is not None
                and message.status == Message.Status.STREAMING
                and message.run_id is not None
            ):
                runtime = await answer_runtime()
                ownership = await runtime.log.ownership(run_id=message.run_id)
                if ownership is not None:
                    stop = (
                        ownership.relay_channel,
                        StopAnswer(message_id=message_id, run_id=message.run_id),
                    )
        if stop is None:
            await self._error(
                "not_found",
                "Nothing is streaming here to stop.",
                client_id=frame.id,
                message_id=frame.message_id,
            )
            return
        # The owner aborts the engine request; its `done` (stopped) comes back as an entry.
        await self.channel_layer.send(stop[0], stop[1].to_channel())

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
        watch = self._watch_of(message.message_id, message.run_id)
        if watch is not None:
            watch.heard()
            await self._show(watch, message.entry)

    async def answer_alive(self, event: dict[str, Any]) -> None:
        alive = AnswerAlive.model_validate(event)
        watch = self._watch_of(alive.message_id, alive.run_id)
        if watch is not None:
            watch.heard()

    async def answer_gone(self, event: dict[str, Any]) -> None:
        """We attached after the run ended: show how it ended."""
        gone = AnswerGone.model_validate(event)
        watch = self._watch_of(gone.message_id, gone.run_id)
        if watch is not None:
            await self._show_rest(watch)

    async def templates_changed(self, event: dict[str, Any]) -> None:
        await self._send_frame(TemplatesChangedFrame(etag=str(event.get("etag", ""))))

    async def chat_watchdog(self, event: dict[str, Any]) -> None:
        """An owner not heard from for a while: alive (what it sent us was lost) or dead with
        its web process. `_show_rest` tells which, and ends the run only in the second case."""
        limit = silence_limit_s(settings.CHAT_RELAY_HEARTBEAT_S)
        for watch in list(self.watching.values()):
            if watch.silent_for() >= limit:
                await self._show_rest(watch)

    # ---- helpers -------------------------------------------------------------------------

    def _watch_of(self, message_id: uuid.UUID, run_id: uuid.UUID) -> RunWatch | None:
        watch = self.watching.get(message_id)
        return watch if watch is not None and watch.run_id == run_id else None

    async def _show(self, watch: RunWatch, entry: LogEntry) -> None:
        """Send one entry unless the browser has it already; entries arrive in seq order."""
        taken = watch.take(entry)
        if taken == "repeat":
            return
        if taken == "gap":
            # Something was lost on the way: show nothing out of order; ask the owner to
            # replay from the last entry shown (once; what it sends is in order).
            attach = watch.resync(watcher=self.channel_name)
            if attach is not None:
                await self.channel_layer.send(watch.owner, attach.to_channel())
            return
        if isinstance(entry, LoggedDelta):
            await self._send_frame(
                DeltaFrame(message_id=watch.message_id, seq=entry.seq, text=entry.text)
            )
            return
        self.watching.pop(watch.message_id, None)
        await self._show_end(watch.message_id, entry, client_id=watch.client_id)

    async def _show_end(
        self, message_id: uuid.UUID, end: LoggedEnd, *, client_id: uuid.UUID | None
    ) -> None:
        if end.status == "failed":
            code = end.error_code if end.error_code in ERROR_CODES else "engine"
            await self._answer_failed(
                code,  # type: ignore[arg-type]
                end.error_message or "The answer failed.",
                client_id=client_id,
                message_id=message_id,
            )
            return
        await self._send_frame(
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


def _kind_of(frame: SendFrame) -> metrics.FrameKind:
    """How the frame carried the text: a patch, a bare template reference, or the text."""
    if frame.patch is not None:
        return "patch"
    return "text" if frame.text is not None else "template"


def _describe(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "frame"
    return f"Invalid {where}: {first['msg']}."[:300]
