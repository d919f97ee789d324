"""A reply draft for a person holding a conversation (docs/handoff.md): the model writes what
the assistant would answer to the customer's last message, streamed to the agent's console,
which shows it in the reply box. Nothing of it is stored: the agent sends it (their own
message, maybe edited), or types over it.

A draft goes through admission like an answer (it takes an engine slot; a full service
refuses it, and the agent simply types), at interactive priority, to the worker that holds the
conversation's prefix (routing affinity). The worker streams straight to the console socket's
channel; the socket gives the slot back when the draft ends or is stopped, and a slot it never
gives back (the web process died) expires after CHAT_ADMISSION_LEASE_S.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from chatapp.admission.limiter import Refused
from chatapp.answers.runs import chat_turns, faq_lookup_of, sampling_of
from chatapp.answers.runtime import admission_limits_of, answer_runtime
from chatapp.conversations import selectors
from chatapp.conversations.models import Message
from inference.wire.affinity import route
from inference.wire.protocol import (
    INTERACTIVE_PRIORITY,
    REQUEST_CHANNEL,
    CancelRequest,
    GenerateRequest,
)

# An agent's drafts are bounded by the engines' capacity, not by a customer's question rate:
# one agent may hold several conversations, each with a draft.
_AGENT_DRAFTS_AT_ONCE = 4


@dataclass(frozen=True, slots=True)
class Draft:
    draft_id: uuid.UUID
    conversation_id: uuid.UUID
    admission_key: str


def _request(
    conversation_id: uuid.UUID, draft_id: uuid.UUID, reply_channel: str
) -> GenerateRequest | None:
    last = (
        Message.objects.filter(conversation_id=conversation_id)
        .exclude(content="")
        .order_by("-created_at")
        .first()
    )
    if last is None or last.role != Message.Role.USER:
        return None  # nothing to reply to: the person spoke last
    context = selectors.generation_context(
        conversation_id=conversation_id, up_to=last, max_messages=settings.CHAT_HISTORY_MAX_MESSAGES
    )
    return GenerateRequest(
        request_id=str(draft_id),
        reply_channel=reply_channel,
        system=context.system_prompt,
        messages=chat_turns(context),
        sampling=sampling_of(context),
        priority=INTERACTIVE_PRIORITY,
        submitted_at=time.time(),
        session_id=str(conversation_id),
        # an approved FAQ answer is offered when one matches, for any message: the person
        # reads it before it is sent (an answer to the customer is only for a question that
        # stands alone, `_chat_request`)
        faq_lookup=faq_lookup_of(context),
    )


async def reply_draft_start(
    *, agent_id: int, conversation_id: uuid.UUID, reply_channel: str
) -> Draft | Refused | None:
    """Queue a draft of the reply to the conversation's last customer message; its worker
    events go to `reply_channel`. None: the customer has not written since the person did."""
    runtime = await answer_runtime()
    draft_id = uuid.uuid4()
    request = await database_sync_to_async(_request)(conversation_id, draft_id, reply_channel)
    if request is None:
        return None
    key = f"agent-drafts:{agent_id}"
    decision = await runtime.admission.acquire(
        request_id=str(draft_id),
        user_key=key,
        capacity=await runtime.registry.capacity(),
        limits=admission_limits_of(
            rate=1_000_000, rate_window_s=60, max_concurrent=_AGENT_DRAFTS_AT_ONCE
        ),
    )
    if isinstance(decision, Refused):
        return decision
    queue = await route(
        queue=REQUEST_CHANNEL,
        session_id=request.session_id,
        affinity=runtime.affinity,
        registry=runtime.registry,
    )
    await runtime.queue.put(queue, request.to_channel())
    return Draft(draft_id=draft_id, conversation_id=conversation_id, admission_key=key)


async def reply_draft_end(draft: Draft, *, worker_channel: str | None, stop: bool) -> None:
    """The draft ended (`stop`: stop the engine now, if a worker has it) and its slot goes
    back. Failures only delay it: the slot's lease expires on its own."""
    runtime = await answer_runtime()
    with contextlib.suppress(Exception):
        if stop and worker_channel is not None:
            layer = get_channel_layer()
            await layer.send(
                worker_channel, CancelRequest(request_id=str(draft.draft_id)).to_channel()
            )
        await runtime.admission.release(
            request_id=str(draft.draft_id), user_key=draft.admission_key
        )
