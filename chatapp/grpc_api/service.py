"""The Chat service: one bidirectional gRPC stream per conversation, over /v1's run pipeline.

Every Send, Edit and Regenerate becomes the request body /v1 parses (the stream's conversation
so far plus the new message, the template reference, sampling and seed), checked by the same
`chat_request_parse` and `prompt_build`, and started by the same `answer_start`. So admission,
the key's limits and priority, the FAQ cache, templates by reference and idempotency by client
id are /v1's, and the same question with the same seed gives the same tokens as /v1.

Refusals before an answer starts end the stream with a status (`errors.abort_with`); an answer
that fails after it started is an `Error` event, and the stream goes on. A Stop, or a deadline
that runs out, stops the answer (the engine request is aborted). A client that goes away
without a deadline leaves an answer with a `client_id` generating, so a `Resume` on a new
stream gets it whole; without a `client_id` the answer is stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from channels.db import database_sync_to_async
from django.conf import settings

from chatapp.answers.entries import LoggedDelta, LoggedEnd
from chatapp.apikeys.models import ApiKey
from chatapp.grpc_api.errors import abort_with, invalid_argument
from chatapp.grpc_api.events import accepted, delta, done, error
from chatapp.grpc_api.generated import chat_pb2, chat_pb2_grpc
from chatapp.openai_api.answers import ApiAnswer, answer_start, idempotency_client_id
from chatapp.openai_api.auth import key_authenticate
from chatapp.openai_api.errors import RETRY_LATER_CODES, ApiError
from chatapp.openai_api.parsing import chat_request_parse
from chatapp.openai_api.prompting import prompt_build

# A stream that ends this close to its deadline ended because of it (a Stop), not a drop.
DEADLINE_SLACK_S = 1.0


@dataclass
class Conversation:
    """What this stream has said and been answered, in /v1's message shape."""

    turns: list[dict[str, str]] = field(default_factory=list)
    # the published template the first Send named: its body is the conversation's first
    # message, rendered by the server for every answer of the stream (as /v1 does)
    template: dict[str, Any] | None = None

    def asked(self, text: str) -> list[dict[str, str]]:
        """The messages to answer: so far, then `text` (none: only the template's body)."""
        return [*self.turns, *([{"role": "user", "content": text}] if text else [])]

    def template_named(self, ref: chat_pb2.TemplateRef) -> None:
        named = {"id": ref.id, "version": ref.version or None, "variables": dict(ref.variables)}
        if self.template is not None and named != self.template:
            raise invalid_argument("A stream's template is named once, by its first message.")
        if self.template is None and self.turns:
            raise invalid_argument("Name the template in the stream's first message.")
        self.template = named

    def last_question(self) -> str:
        for turn in reversed(self.turns):
            if turn["role"] == "user":
                return turn["content"]
        raise invalid_argument("There is no earlier message to edit or answer again.")

    def without_last_exchange(self) -> None:
        """Forget the last question and its answer (an edit or a regenerate replaces them)."""
        while self.turns and self.turns[-1]["role"] == "assistant":
            self.turns.pop()
        if self.turns:
            self.turns.pop()


@dataclass(frozen=True)
class Ask:
    """One answer this stream asked for: the messages, the options, how to follow it."""

    messages: list[dict[str, str]]
    client_id: str
    send: chat_pb2.Send | None = None
    after_seq: int = 0  # a Resume: entries up to here were received already


class ChatService(chat_pb2_grpc.ChatServicer):
    async def Chat(
        self,
        request_iterator: AsyncIterator[chat_pb2.ClientEvent],
        context: grpc.aio.ServicerContext[chat_pb2.ClientEvent, chat_pb2.ServerEvent],
    ) -> AsyncIterator[chat_pb2.ServerEvent]:
        key = await _api_key(context)
        events: asyncio.Queue[chat_pb2.ClientEvent | None] = asyncio.Queue()
        stop = asyncio.Event()
        reader = asyncio.create_task(_read(request_iterator, events, stop))
        conversation = Conversation()
        try:
            while (event := await events.get()) is not None:
                stop.clear()
                try:
                    ask = await _ask_of(event, conversation, key)
                    if ask is None:
                        continue
                    answer = await _start(key, ask, conversation.template)
                except ApiError as exc:
                    await abort_with(context, exc)
                    return
                async for reply in _follow(answer, ask, stop, context, conversation):
                    yield reply
        finally:
            reader.cancel()


async def _api_key(context: grpc.aio.ServicerContext[Any, Any]) -> ApiKey:
    metadata = dict(context.invocation_metadata() or ())
    scheme, _, raw = str(metadata.get("authorization", "")).partition(" ")
    key: ApiKey | None = None
    if scheme.lower() == "bearer" and raw.strip():
        key = await database_sync_to_async(key_authenticate)(raw.strip())
    if key is None:
        await context.abort(
            grpc.StatusCode.UNAUTHENTICATED,
            "Send an active API key as the metadata 'authorization: Bearer ick_...' "
            "(keys are created in the admin, under API keys).",
        )
    assert key is not None
    return key


async def _read(
    requests: AsyncIterator[chat_pb2.ClientEvent],
    events: asyncio.Queue[chat_pb2.ClientEvent | None],
    stop: asyncio.Event,
) -> None:
    """Client events in order; a Stop is also flagged at once, for the answer being followed."""
    try:
        async for event in requests:
            if event.WhichOneof("event") == "stop":
                stop.set()
            events.put_nowait(event)
    finally:
        events.put_nowait(None)


async def _ask_of(
    event: chat_pb2.ClientEvent, conversation: Conversation, key: ApiKey
) -> Ask | None:
    which = event.WhichOneof("event")
    if which == "send":
        if event.send.HasField("template"):
            conversation.template_named(event.send.template)
        return Ask(conversation.asked(event.send.text), event.send.client_id, send=event.send)
    if which == "edit":
        conversation.last_question()  # there must be one
        conversation.without_last_exchange()
        return Ask(conversation.asked(event.edit.text), event.edit.client_id)
    if which == "regenerate":
        question = conversation.last_question()
        conversation.without_last_exchange()
        return Ask(conversation.asked(question), event.regenerate.client_id)
    if which == "resume":
        question = await database_sync_to_async(_question_of)(key, event.resume.client_id)
        return Ask(
            [{"role": "user", "content": question}],
            event.resume.client_id,
            after_seq=max(event.resume.after_seq, 0),
        )
    if which == "stop":
        return None  # nothing is being answered between answers
    raise invalid_argument("A ClientEvent needs one of send, stop, edit, regenerate, resume.")


def _question_of(key: ApiKey, client_id: str) -> str:
    from chatapp.conversations.models import Message

    if not client_id:
        raise invalid_argument("Resume needs the client_id of the Send it resumes.")
    found = (
        Message.objects.filter(
            client_message_id=idempotency_client_id(key=key, idempotency_key=client_id),
            sender=key.user,
        )
        .values_list("content", flat=True)
        .first()
    )
    if found is None:
        raise ApiError(
            status=404,
            code="not_found",
            message=f"No message was sent with client_id {client_id[:100]!r} by this key.",
        )
    return str(found)


async def _start(key: ApiKey, ask: Ask, template: dict[str, Any] | None) -> ApiAnswer:
    body: dict[str, Any] = {"model": settings.CHAT_API_MODEL, "messages": ask.messages}
    if template is not None:
        body["template"] = template
    send = ask.send
    if send is not None:
        for name in ("max_tokens", "temperature", "top_p", "seed"):
            if send.sampling.HasField(name):
                body[name] = getattr(send.sampling, name)
    parsed = chat_request_parse(json.dumps(body).encode())
    prompt = await database_sync_to_async(prompt_build)(parsed)
    background = key.priority == "background" or bool(send and send.background)
    return await answer_start(
        key=key,
        prompt=prompt,
        background=background,
        idempotency_key=ask.client_id or None,
    )


async def _follow(
    answer: ApiAnswer,
    ask: Ask,
    stop: asyncio.Event,
    context: grpc.aio.ServicerContext[Any, Any],
    conversation: Conversation,
) -> AsyncIterator[chat_pb2.ServerEvent]:
    """The answer's events until it ends; a Stop or a spent deadline stops it."""
    message_id = str(answer.message_id)
    if not ask.after_seq:
        yield accepted(client_id=ask.client_id, message_id=message_id)
    entries = answer.entries()
    stopping = asyncio.create_task(stop.wait())
    text, ended = "", False
    try:
        while True:
            entry_task = asyncio.ensure_future(anext(entries))
            await asyncio.wait({entry_task, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not entry_task.done():
                # Stop: the relay aborts the engine request; the end comes through the entries
                await answer.runtime.relay.stop(answer.watch.run_id)
                stopping = asyncio.create_task(asyncio.Event().wait())
                await asyncio.wait({entry_task})
            entry = entry_task.result()
            if isinstance(entry, LoggedDelta):
                text += entry.text
                if entry.seq > ask.after_seq:
                    yield delta(message_id=message_id, entry=entry)
                continue
            assert isinstance(entry, LoggedEnd)
            ended = True
            conversation.turns = [*ask.messages, {"role": "assistant", "content": text}]
            if entry.status == "failed":
                later = entry.error_code in RETRY_LATER_CODES
                wait = settings.CHAT_BUSY_RETRY_AFTER_S if later else 0.0
                yield error(message_id=message_id, end=entry, retry_after_s=wait)
            else:
                yield done(message_id=message_id, end=entry)
            return
    finally:
        stopping.cancel()
        if not ended:
            await _leave(answer, context)


async def _leave(answer: ApiAnswer, context: grpc.aio.ServicerContext[Any, Any]) -> None:
    """The stream ended mid-answer. A spent deadline is a Stop; otherwise an answer with a
    client_id goes on for a Resume and one without is stopped (`ApiAnswer.close`)."""
    remaining = context.time_remaining()
    with contextlib.suppress(Exception):
        # The client cancels at its deadline, which reaches us a moment before ours runs out.
        if remaining is not None and remaining <= DEADLINE_SLACK_S:
            answer.ended = True
            await answer.runtime.relay.stop(answer.watch.run_id, code="deadline_exceeded")
        else:
            await answer.close()
