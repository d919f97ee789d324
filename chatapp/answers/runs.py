"""Starting a run: admission, the stored turn, the worker request, and handing it to the relay.

The WebSocket consumer (send, regenerate, edit) and the OpenAI API start runs the same way:
the run id is drawn first and is the admission lease, the request id the worker sees, the
message row's `run_id` and the log's key. Every start has one order of steps
(`_queued_run_start`): admission, one read (a repeat? the history), the worker request queued,
then the turn stored while the worker starts, for a new question (`send_run_start`: a chat
send, an API request) and a regenerate or an edit (`rerun_start`) alike. A start the user is
refused at the read (not found, still streaming) gives the slot back without counting against
the user's rate; one refused at the write stops the run it queued. A repeated frame (the same
client id) starts nothing: it gets the run the first one started.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import User

from chatapp.admission.limiter import AdmissionLimits, Refused
from chatapp.answers.runtime import AnswerRuntime, answer_runtime
from chatapp.answers.timeline import FirstTokenClock
from chatapp.conversations import selectors, services
from chatapp.errors import ApplicationError, NotFoundError
from chatapp.prompts.models import PromptTemplateVersion
from chatapp.prompts.resolution import published_version_get
from inference.faq.index import GLOBAL_SCOPE, template_scope
from inference.wire.affinity import route
from inference.wire.protocol import (
    BACKGROUND_CHANNEL,
    REQUEST_CHANNEL,
    ChatTurn,
    FaqLookup,
    GenerateRequest,
    PrefillRequest,
    SamplingOptions,
)

TurnWrite = Callable[[uuid.UUID], services.TurnStart]  # stores the turn for run id -> TurnStart


@dataclass(frozen=True, slots=True)
class Started:
    runtime: AnswerRuntime
    turn: services.TurnStart
    run_id: uuid.UUID  # the run generating the answer: new, or the first frame's on a repeat
    clock: FirstTokenClock  # where its time to first token goes (marked up to the queue)

    @property
    def repeated(self) -> bool:
        return not self.turn.created


def sampling_of(context: selectors.GenerationContext) -> SamplingOptions:
    """The conversation's sampling (its template's), with the service's answer length cap."""
    return SamplingOptions.model_validate(
        {
            **context.sampling,
            "max_tokens": settings.CHAT_MAX_TOKENS or context.sampling.get("max_tokens"),
        }
    )


def chat_turns(context: selectors.GenerationContext) -> list[ChatTurn]:
    return [
        ChatTurn(role="user" if t.role == "user" else "assistant", content=t.content)
        for t in context.turns
    ]


def _chat_request(
    context: selectors.GenerationContext,
    *,
    run_id: uuid.UUID,
    reply_channel: str,
    session_id: uuid.UUID,
    bypass_faq: bool,
) -> GenerateRequest:
    return GenerateRequest(
        request_id=str(run_id),
        reply_channel=reply_channel,
        system=context.system_prompt,
        messages=chat_turns(context),
        sampling=sampling_of(context),
        submitted_at=time.time(),
        session_id=str(session_id),
        faq_lookup=faq_lookup_of(context) if context.standalone and not bypass_faq else None,
    )


def faq_lookup_of(context: selectors.GenerationContext) -> FaqLookup | None:
    """The FAQ entries a question of this conversation may be answered from: the global ones
    and its template's (None: the FAQ cache is off)."""
    if not settings.CHAT_FAQ_ENABLED:
        return None
    scopes = [GLOBAL_SCOPE]
    if context.template_id is not None:
        scopes.append(template_scope(context.template_id))
    return FaqLookup(scopes=scopes)


@dataclass(frozen=True, slots=True)
class NewQuestion:
    """A chat.send's question, not stored yet."""

    sender: User
    conversation_id: uuid.UUID | None  # None: it starts a conversation
    client_message_id: uuid.UUID
    text: str
    template_version: PromptTemplateVersion | None = None


# The worker request of a question whose caller brings the prompt (the API's messages), for
# run id and reply channel; without one the request is built from the stored conversation.
RequestOf = Callable[[uuid.UUID, str], GenerateRequest]


@dataclass(frozen=True, slots=True)
class _Plan:
    """A new run, as read before its turn is stored."""

    answer_id: uuid.UUID  # the answer row it fills
    session_id: uuid.UUID  # its conversation (routing affinity)
    context: selectors.GenerationContext | None  # None: the caller brings the request
    store: Callable[[uuid.UUID], services.TurnStart]  # writes its turn, for the run id


_ChatRequest = Callable[[_Plan, uuid.UUID, str], GenerateRequest]


async def send_run_start(
    *,
    question: NewQuestion,
    user_key: str,
    watcher: str,
    received_at: float | None = None,
    request_of: RequestOf | None = None,
    request_channel: str = REQUEST_CHANNEL,
    limits: AdmissionLimits | None = None,
    finish_unwatched: bool = False,
) -> Started | Refused:
    """Start the answer to a new question: a chat send, or an API request (`request_of`,
    `limits`: the API's prompt and its key's limits; `finish_unwatched`: see
    `AnswerRelay.start`). One read first: a retried send (its client id stored) starts
    nothing and returns the first turn, as `repeated`. See `_queued_run_start`."""
    ids = services.TurnIds.new()

    def plan() -> services.TurnStart | _Plan:
        existing = services.turn_existing(
            sender=question.sender, client_message_id=question.client_message_id
        )
        if existing is not None:  # a retry: nothing new starts
            return existing
        return _Plan(
            answer_id=ids.assistant_message,
            session_id=question.conversation_id or ids.conversation,
            # the API brings its own prompt; a chat send reads the conversation's
            context=None
            if request_of is not None
            else _next_context(
                sender=question.sender,
                conversation_id=question.conversation_id,
                text=question.text,
                template_version=question.template_version,
            ),
            store=lambda run_id: services.turn_start(
                sender=question.sender,
                conversation_id=question.conversation_id,
                client_message_id=question.client_message_id,
                text=question.text,
                template_version=question.template_version,
                run_id=run_id,
                ids=ids,
            ),
        )

    def request(plan: _Plan, run_id: uuid.UUID, reply_channel: str) -> GenerateRequest:
        if request_of is not None:
            return request_of(run_id, reply_channel)
        return _plan_request(plan, run_id, reply_channel, bypass_faq=False)

    return await _queued_run_start(
        plan=plan,
        request=request,
        user_key=user_key,
        watcher=watcher,
        received_at=received_at,
        request_channel=request_channel,
        limits=limits,
        finish_unwatched=finish_unwatched,
    )


async def rerun_start(
    *,
    rerun: services.Rerun,
    user_key: str,
    watcher: str,
    bypass_faq: bool = False,
    received_at: float | None = None,
    limits: AdmissionLimits | None = None,
) -> Started | Refused:
    """Start a regenerate or an edit (`services.Rerun`), in the same order as a send: what
    it will change is read and checked first (a repeated frame starts nothing and returns
    the first one's turn; a rerun the user may not do raises for them), its request queued,
    then the rerun stored, under the conversation's lock, which alone decides: a rerun refused
    there (another tab's message landed in between) stops the run it queued."""
    answer_id = uuid.uuid4()  # for an edited question whose answer row is gone

    def plan() -> services.TurnStart | _Plan:
        target = services.rerun_target(rerun)
        if isinstance(target, services.TurnStart):
            return target
        max_messages = settings.CHAT_HISTORY_MAX_MESSAGES
        context = (
            selectors.generation_context(
                conversation_id=target.conversation.id,
                up_to=target.question,
                max_messages=max_messages,
            )
            if rerun.text is None
            else selectors.edited_turn_context(
                conversation=target.conversation,
                question=target.question,
                text=rerun.text,
                max_messages=max_messages,
            )
        )
        return _Plan(
            answer_id=answer_id if target.answer is None else target.answer.id,
            session_id=target.conversation.id,
            context=context,
            store=lambda run_id: services.rerun_store(rerun, run_id=run_id, answer_id=answer_id),
        )

    return await _queued_run_start(
        plan=plan,
        request=lambda plan, run_id, reply: _plan_request(
            plan, run_id, reply, bypass_faq=bypass_faq
        ),
        user_key=user_key,
        watcher=watcher,
        received_at=received_at,
        limits=limits,
    )


async def _queued_run_start(
    *,
    plan: Callable[[], services.TurnStart | _Plan],
    request: _ChatRequest,
    user_key: str,
    watcher: str,
    received_at: float | None,
    request_channel: str = REQUEST_CHANNEL,
    limits: AdmissionLimits | None = None,
    finish_unwatched: bool = False,
) -> Started | Refused:
    """Admit a new run, read what it needs (one database round, reads only), queue its
    worker request, then store its turn while the worker starts: the write (5-14 ms measured
    on SQLite) is off the first token's path.

    A plan that finds the turn already started (a repeated frame) starts nothing. The relay
    keeps the run's end until the turn is stored (`stored`), so an answer faster than the
    write is never lost. A write that fails or refuses stops the run and frees its slot,
    nothing of it is stored, and the error is raised for the user: the question was not
    taken. A write that finds the client id taken (a retry that raced this one) stops the new
    run and returns the first turn's.
    """
    clock = FirstTokenClock.started(received_at)
    runtime = await answer_runtime()
    run_id = uuid.uuid4()
    decision = await runtime.admission.acquire(
        request_id=str(run_id),
        user_key=user_key,
        capacity=await runtime.registry.capacity(),
        limits=limits,
    )
    if isinstance(decision, Refused):
        return decision
    clock.admitted = time.monotonic()
    stored: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    try:
        planned = await database_sync_to_async(plan)()
        if isinstance(planned, services.TurnStart):  # a repeated frame: the first run goes on
            await _slot_free(runtime, run_id, user_key, refund=True)
            return Started(runtime=runtime, turn=planned, run_id=planned.run_id, clock=clock)
        worker_request = request(planned, run_id, runtime.relay.channel)
    except BaseException as exc:
        await _slot_free(runtime, run_id, user_key, refund=isinstance(exc, ApplicationError))
        raise
    try:
        await runtime.relay.start(
            message_id=planned.answer_id,
            user_key=user_key,
            watcher=watcher,
            request=worker_request,
            request_channel=request_channel,
            clock=clock,
            stored=stored,
            finish_unwatched=finish_unwatched,
        )
        turn = await database_sync_to_async(planned.store)(run_id)
    except BaseException:  # every way out resolves `stored`: the relay's end waits for it
        await _not_stored(runtime, run_id, user_key, stored)
        raise
    if not turn.created:  # a retry raced this one and stored first: its run is the answer
        await _not_stored(runtime, run_id, user_key, stored)
        return Started(runtime=runtime, turn=turn, run_id=turn.run_id, clock=clock)
    clock.stored = time.monotonic()
    stored.set_result(True)
    return Started(runtime=runtime, turn=turn, run_id=run_id, clock=clock)


def _plan_request(
    plan: _Plan, run_id: uuid.UUID, reply_channel: str, *, bypass_faq: bool
) -> GenerateRequest:
    assert plan.context is not None, "a chat run reads its context in its plan"
    return _chat_request(
        plan.context,
        run_id=run_id,
        reply_channel=reply_channel,
        session_id=plan.session_id,
        bypass_faq=bypass_faq,
    )


async def _slot_free(
    runtime: AnswerRuntime, run_id: uuid.UUID, user_key: str, *, refund: bool
) -> None:
    """Give back a run's admission slot (`refund`: its start does not count against the
    user's rate); a failure here only delays it: the lease expires on its own."""
    with contextlib.suppress(Exception):
        await runtime.admission.release(request_id=str(run_id), user_key=user_key, refund=refund)


async def _not_stored(
    runtime: AnswerRuntime, run_id: uuid.UUID, user_key: str, stored: asyncio.Future[bool]
) -> None:
    """The run was queued, its turn was not written: nothing of it is stored; stop it. Its
    slot is freed here, before the user hears the question was not taken (they may ask again
    at once); the relay's release when the run ends (once the worker confirms the abort) then
    finds it gone."""
    stored.set_result(False)
    with contextlib.suppress(Exception):
        await runtime.relay.stop(run_id, code="not_stored")
    await _slot_free(runtime, run_id, user_key, refund=False)


def _next_context(
    *,
    sender: User,
    conversation_id: uuid.UUID | None,
    text: str,
    template_version: PromptTemplateVersion | None,
) -> selectors.GenerationContext:
    """What the worker needs for `text` as the conversation's next question; NotFoundError
    for a conversation that is not the sender's."""
    context = selectors.next_turn_context(
        owner=sender,
        conversation_id=conversation_id,
        text=text,
        template_version=template_version,
        max_messages=settings.CHAT_HISTORY_MAX_MESSAGES,
    )
    if context is None:
        raise NotFoundError("This conversation does not exist or is not yours.")
    return context


def _draft_context(
    *, sender: User, conversation_id: uuid.UUID | None, text: str, template: TemplateKey | None
) -> selectors.GenerationContext:
    version = (
        None
        if template is None
        else published_version_get(template_id=template.id, version=template.version)
    )
    return _next_context(
        sender=sender, conversation_id=conversation_id, text=text, template_version=version
    )


# A typing prefill is not queued behind this many requests on its queue: one that waits that long
# is stale when a worker reaches it, and the bound keeps a queue no worker reads (its worker
# died) from growing with every draft.
DRAFTS_QUEUED_MAX = 8


@dataclass(frozen=True, slots=True)
class TemplateKey:
    """A published template version, by its id and version number."""

    id: int
    version: int


async def draft_prefill(
    *,
    sender: User,
    conversation_id: uuid.UUID | None,
    text: str,
    template: TemplateKey | None = None,
) -> None:
    """Queue a typing prefill of `text` as the conversation's next question (with `template`:
    as the first message of a new conversation from it), on the background queue of the
    worker that will answer it (routing affinity), so the prompt is in that engine's prefix
    cache by Send. The worker drops it when stale or busy with chat; the draft is not stored
    or logged. Raises NotFoundError for a conversation that is not the user's,
    TemplateUnknown for a template version that is not published."""
    runtime = await answer_runtime()
    every_s = settings.CHAT_USER_DRAFT_EVERY_S
    if not await runtime.admission.draft_take(user_key=str(sender.pk), every_s=every_s):
        return  # past the user's draft limit (all sockets): a hint dropped, nothing lost
    context = await database_sync_to_async(_draft_context)(
        sender=sender, conversation_id=conversation_id, text=text, template=template
    )
    session_id = None if conversation_id is None else str(conversation_id)
    request = PrefillRequest(
        request_id=f"prefill-{uuid.uuid4()}",
        system=context.system_prompt,
        messages=chat_turns(context),
        submitted_at=time.time(),
        session_id=session_id,
    )
    queue = await route(
        queue=BACKGROUND_CHANNEL,
        session_id=session_id,
        affinity=runtime.affinity,
        registry=runtime.registry,
    )
    if await runtime.queue.depth(queue) >= DRAFTS_QUEUED_MAX:
        return  # the workers are behind (or gone): a draft would only be stale by then
    await runtime.queue.put(queue, request.to_channel())
