"""How one chat socket starts an answer: a send (a text, or a template reference plus what
changed), a regenerate or an edit. Each is refused while an answer streams on the socket, is
admitted and stored through `chatapp.answers.runs`, and then shown by the socket's
`SocketWatching`; a retried send (the same client id) shows the answer the first one started.
A draft prefills the prompt a send to come will have, with the same templates.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import User

from chatapp.admission.limiter import AdmissionLimits, Refused, grouped_user_key
from chatapp.answers import runs
from chatapp.answers.follower import RunWatch
from chatapp.conversations import services
from chatapp.conversations.message_text import text_refusal
from chatapp.errors import ApplicationError
from chatapp.metrics import recording as metrics
from chatapp.prompts.models import PromptTemplateVersion
from chatapp.prompts.resolution import ResendFull, templated_message_resolve
from chatapp.prompts.selectors import latest_published_version
from chatapp.realtime.schemas import (
    ERROR_CODES,
    AcceptedFrame,
    AnyServerFrame,
    DraftFrame,
    EditFrame,
    ErrorCode,
    ErrorFrame,
    RegenerateFrame,
    ResendFullFrame,
    SendFrame,
)
from chatapp.realtime.watching import SocketWatching

BUSY_HERE = "An answer is still streaming; stop it first."
NOT_OFFERED = "This template is not offered here."
_Start = Callable[[], Awaitable[runs.Started | Refused]]  # admits, queues and stores a run


# The socket's error reply: sends the frame and counts it (chat:errors_total).
Refuse = Callable[[ErrorFrame], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class StartPolicy:
    """What a socket's user may start, beyond the frames: a staff member's defaults, or a
    website guest's (chatapp/realtime/guests.py)."""

    limits: AdmissionLimits | None = None  # None: the service's; a guest: its site's
    # A new conversation without a template is asked with this one's system prompt (its latest
    # published version at the first question): a website's default template.
    default_template_id: int | None = None
    template_ids: frozenset[int] | None = None  # None: any published template
    # Admission counts the user in this group too (a guest: its site's visitors from its
    # network address), bounded by `limits.group`.
    admission_group: str | None = None


STAFF = StartPolicy()


class AnswerStarting:
    """The frames that start an answer, for one socket of one user."""

    def __init__(
        self,
        *,
        user: User,
        channel_name: str,
        watching: SocketWatching,
        send: Callable[[AnyServerFrame], Awaitable[None]],
        refuse: Refuse,
        policy: StartPolicy = STAFF,
    ) -> None:
        self._user = user
        self._limits = policy.limits
        self._default_template_id = policy.default_template_id
        self._template_ids = policy.template_ids
        self._admission_group = policy.admission_group
        self._channel = channel_name
        self._watching = watching
        self._send = send
        self._refuse = refuse

    @property
    def user_key(self) -> str:
        """Whom admission counts a run against."""
        if self._admission_group is None:
            return str(self._user.pk)
        return grouped_user_key(str(self._user.pk), self._admission_group)

    async def send(self, frame: SendFrame, *, received_at: float, frame_bytes: int) -> None:
        # A retried send (the same client id) gets the answer it started, never a second:
        # `send_run_start` checks in its one read; only where a refusal comes before that (an
        # answer streams here; admission refuses, in `_started`) is it looked up here.
        if self._watching.busy:
            if not await self._shown_if_sent(frame.id):
                await self._refuse(ErrorFrame(code="busy", message=BUSY_HERE, id=frame.id))
            return
        template_version = None
        text = frame.text
        if frame.template is not None:
            if await self._refused_template(frame.template.id, client_id=frame.id):
                return
            if frame.conversation_id is not None:
                only_new = "A template can only start a new conversation."
                await self._refuse(ErrorFrame(code="invalid", message=only_new, id=frame.id))
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
                await self._send(ResendFullFrame(id=frame.id, reason=resend.reason))
                return
            except ApplicationError as exc:
                await self.app_error(exc, client_id=frame.id)
                return
            text, template_version = resolved.text, resolved.version
        assert text is not None  # the frame schema requires text without a template
        if template_version is None and frame.conversation_id is None:
            template_version = await self._default_template_version()
        if await self.refused_text(text, client_id=frame.id):
            return
        question = runs.NewQuestion(
            sender=self._user,
            conversation_id=frame.conversation_id,
            client_message_id=frame.id,
            text=text,
            template_version=template_version,
        )
        started = await self._started(
            lambda: runs.send_run_start(
                question=question,
                user_key=self.user_key,
                watcher=self._channel,
                received_at=received_at,
                limits=self._limits,
            ),
            client_id=frame.id,
            retried_send=True,
        )
        if started is None:
            return
        if not started.repeated:
            metrics.request_frame(kind=_kind_of(frame), frame_bytes=frame_bytes, prompt_text=text)
        await self._run_show(started, client_id=frame.id)

    async def draft(self, frame: DraftFrame) -> None:
        """Prefill the prompt the send of `frame`'s text will have (`runs.draft_prefill`), with
        the template the send would use: the frame's, if offered here, or for a new
        conversation the policy's default."""
        template = None
        if frame.template is not None:
            if await self._refused_template(frame.template.id, client_id=frame.id):
                return
            template = runs.TemplateKey(id=frame.template.id, version=frame.template.version)
        elif frame.conversation_id is None:
            default = await self._default_template_version()
            if default is not None:
                template = runs.TemplateKey(id=default.template_id, version=default.version)
        try:
            await runs.draft_prefill(
                sender=self._user,
                conversation_id=frame.conversation_id,
                text=frame.text,
                template=template,
            )
        except ApplicationError as exc:
            await self.app_error(exc, client_id=frame.id)

    async def _refused_template(self, template_id: int, *, client_id: uuid.UUID) -> bool:
        """Refuse a template the policy does not offer (True: refused, the user told)."""
        if self._template_ids is None or template_id in self._template_ids:
            return False
        await self._refuse(ErrorFrame(code="not_found", message=NOT_OFFERED, id=client_id))
        return True

    async def _default_template_version(self) -> PromptTemplateVersion | None:
        if self._default_template_id is None:
            return None
        version: PromptTemplateVersion | None = await database_sync_to_async(
            latest_published_version
        )(template_id=self._default_template_id)
        return version

    async def regenerate(self, frame: RegenerateFrame, *, received_at: float) -> None:
        if self._watching.busy:
            await self._refuse(ErrorFrame(code="busy", message=BUSY_HERE, id=frame.id))
            return
        rerun = services.Rerun(sender=self._user, message_id=frame.message_id, client_id=frame.id)
        started = await self._started(
            self._rerun_start(rerun, bypass_faq=frame.bypass_faq, received_at=received_at),
            client_id=frame.id,
            message_id=frame.message_id,
        )
        if started is not None:
            await self._run_show(started, client_id=frame.id)

    async def edit(self, frame: EditFrame, *, received_at: float, frame_bytes: int) -> None:
        if self._watching.busy:
            await self._refuse(ErrorFrame(code="busy", message=BUSY_HERE, id=frame.id))
            return
        if await self.refused_text(frame.text, client_id=frame.id):
            return
        rerun = services.Rerun(
            sender=self._user, message_id=frame.message_id, client_id=frame.id, text=frame.text
        )
        started = await self._started(
            self._rerun_start(rerun, bypass_faq=False, received_at=received_at),
            client_id=frame.id,
            message_id=frame.message_id,
        )
        if started is None:
            return
        if not started.repeated:
            metrics.request_frame(kind="text", frame_bytes=frame_bytes, prompt_text=frame.text)
        await self._run_show(started, client_id=frame.id)

    async def refused_text(self, text: str, *, client_id: uuid.UUID) -> bool:
        """Refuse a text that is empty or too long (True: refused, the user told why)."""
        refusal = text_refusal(text, max_chars=settings.CHAT_MAX_MESSAGE_CHARS)
        if refusal is None:
            return False
        await self._refuse(ErrorFrame(code=refusal.code, message=refusal.message, id=client_id))
        return True

    async def app_error(
        self,
        exc: ApplicationError,
        *,
        client_id: uuid.UUID | None = None,
        message_id: uuid.UUID | None = None,
    ) -> None:
        code: ErrorCode = exc.code if exc.code in ERROR_CODES else "invalid"  # type: ignore[assignment]
        await self._refuse(
            ErrorFrame(code=code, message=exc.message, id=client_id, message_id=message_id)
        )

    # ---- helpers -------------------------------------------------------------------------

    async def _shown_if_sent(self, client_id: uuid.UUID) -> bool:
        """Show the answer a send with this client id already started, if there is one."""
        existing = await database_sync_to_async(services.turn_existing)(
            sender=self._user, client_message_id=client_id
        )
        if existing is None:
            return False
        await self._send(_accepted(client_id, existing))
        await self._watching.follow(existing.assistant_message, after_seq=0, client_id=client_id)
        return True

    def _rerun_start(
        self, rerun: services.Rerun, *, bypass_faq: bool, received_at: float
    ) -> _Start:
        def start() -> Awaitable[runs.Started | Refused]:
            return runs.rerun_start(
                rerun=rerun,
                user_key=self.user_key,
                watcher=self._channel,
                bypass_faq=bypass_faq,
                received_at=received_at,
                limits=self._limits,
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
            await self.app_error(exc, client_id=client_id, message_id=message_id)
            return None
        if isinstance(started, Refused):
            if retried_send and await self._shown_if_sent(client_id):
                return None
            code: ErrorCode = (
                "no_worker"
                if started.reason == "no_worker"
                else "rate_limited"
                if started.reason in ("rate_limited", "group_rate_limited")
                else "busy"
            )
            await self._refuse(
                ErrorFrame(
                    code=code,
                    message=started.message,
                    id=client_id,
                    retry_after_s=started.retry_after_s,
                )
            )
            return None
        return started

    async def _run_show(self, started: runs.Started, *, client_id: uuid.UUID) -> None:
        """Tell the browser where the answer goes, and show it (or the first frame's).

        The run's request went out before its turn was stored; the browser gets
        `chat.accepted` before the answer's entries, which are handled only once this frame
        is (a consumer handles one message at a time).
        """
        if started.repeated:
            await self._send(_accepted(client_id, started.turn))
            await self._watching.follow(
                started.turn.assistant_message, after_seq=0, client_id=client_id
            )
            return
        await self._watching.started(
            RunWatch(
                message_id=started.turn.assistant_message.id,
                run_id=started.run_id,
                owner=started.runtime.relay.channel,
                client_id=client_id,
                clock=started.clock,
            )
        )
        await self._send(_accepted(client_id, started.turn))


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
