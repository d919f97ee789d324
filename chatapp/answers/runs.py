"""Starting a run: admission, the stored turn, the worker request, and handing it to the relay.

The WebSocket consumer (send, regenerate, edit) and the OpenAI API start runs the same way:
the run id is drawn first and is the admission lease, the request id the worker sees, the
message row's `run_id` and the log's key. A write the user is refused (not found, still
streaming) gives the slot back without counting against the user's rate. A repeated frame
(the same client id) starts nothing: it gets the run the first one started.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from channels.db import database_sync_to_async
from django.conf import settings

from chatapp.admission.limiter import AdmissionLimits, Refused
from chatapp.answers.entries import LoggedEnd
from chatapp.answers.recovery import answer_store
from chatapp.answers.runtime import AnswerRuntime, answer_runtime
from chatapp.answers.timeline import FirstTokenClock
from chatapp.conversations import selectors, services
from chatapp.errors import ApplicationError
from inference.faq.index import GLOBAL_SCOPE, template_scope
from inference.protocol import (
    REQUEST_CHANNEL,
    ChatTurn,
    FaqLookup,
    GenerateRequest,
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


async def run_admit_and_store(
    *,
    user_key: str,
    write: TurnWrite,
    limits: AdmissionLimits | None = None,
    received_at: float | None = None,
) -> Started | Refused:
    """Take an admission slot for a new run and store its turn. Refused: nothing stored.
    A write that raises (ApplicationError: refused for the user) gives the slot back and its
    start does not count against the user's rate. `received_at` (monotonic): when the frame
    asking for it was read, where the run's `FirstTokenClock` starts."""
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
    try:
        turn = await database_sync_to_async(write)(run_id)
    except BaseException as exc:
        with contextlib.suppress(Exception):
            await runtime.admission.release(
                request_id=str(run_id),
                user_key=user_key,
                refund=isinstance(exc, ApplicationError),
            )
        raise
    clock.stored = time.monotonic()
    if not turn.created:  # a repeated frame: the first one's run goes on; this slot is unused
        with contextlib.suppress(Exception):
            await runtime.admission.release(request_id=str(run_id), user_key=user_key, refund=True)
    return Started(runtime=runtime, turn=turn, run_id=turn.run_id, clock=clock)


async def chat_run_start(
    *, started: Started, user_key: str, watcher: str, bypass_faq: bool
) -> None:
    """Build the worker request of a chat turn from its conversation and hand the run to the
    relay, which owns it from here (and frees the slot when it ends)."""
    runtime, turn = started.runtime, started.turn
    try:
        context = await database_sync_to_async(selectors.generation_context)(
            conversation_id=turn.conversation.id,
            up_to=turn.user_message,
            max_messages=settings.CHAT_HISTORY_MAX_MESSAGES,
        )
    except BaseException:
        with contextlib.suppress(Exception):
            await runtime.admission.release(request_id=str(started.run_id), user_key=user_key)
        await answer_store(
            message_id=turn.assistant_message.id,
            run_id=started.run_id,
            content="",
            end=LoggedEnd(seq=1, status="failed", error_code="internal"),
        )
        raise
    scopes = [GLOBAL_SCOPE]
    if context.template_id is not None:
        scopes.append(template_scope(context.template_id))
    request = GenerateRequest(
        request_id=str(started.run_id),
        reply_channel=runtime.relay.channel,
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
        session_id=str(turn.conversation.id),
        faq_lookup=FaqLookup(scopes=scopes)
        if context.standalone and not bypass_faq and settings.CHAT_FAQ_ENABLED
        else None,
    )
    await runtime.relay.start(
        message_id=turn.assistant_message.id,
        user_key=user_key,
        watcher=watcher,
        request=request,
        request_channel=REQUEST_CHANNEL,
        clock=started.clock,
    )
