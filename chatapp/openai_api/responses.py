"""Build OpenAI response bodies from the relay's log entries."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Literal

from django.conf import settings

from chatapp.answers.entries import LoggedEnd
from chatapp.openai_api.schemas import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    Choice,
    ChoiceLogprobs,
    ChunkChoice,
    ChunkDelta,
    FaqMarker,
    PromptTokensDetails,
    TokenLogprob,
    TopLogprob,
    Usage,
)
from inference.wire import protocol

FAQ_FINGERPRINT = "faq"


def completion_id(message_id: uuid.UUID) -> str:
    """The stored assistant message's id: an API answer can be found in the database."""
    return f"chatcmpl-{message_id.hex}"


def finish_reason(end: LoggedEnd) -> Literal["stop", "length"]:
    return "length" if end.finish_reason == "length" else "stop"


def usage(end: LoggedEnd) -> Usage:
    prompt, completion = end.prompt_tokens or 0, end.completion_tokens or 0
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=end.cached_prompt_tokens or 0),
    )


def faq_marker(end: LoggedEnd) -> FaqMarker | None:
    return FaqMarker(entry_id=end.faq_entry_id) if end.source == "faq" else None


def _bytes(token: str) -> list[int]:
    # A token that is part of a multi-byte character decodes to U+FFFD on its own; its
    # bytes are then those of the replacement character, as in vLLM's own server.
    return list(token.encode("utf-8", errors="replace"))


def choice_logprobs(tokens: Sequence[protocol.TokenLogprob]) -> ChoiceLogprobs:
    """The worker's per-token logprobs in OpenAI's shape."""
    return ChoiceLogprobs(
        content=[
            TokenLogprob(
                token=token.token,
                logprob=token.logprob,
                bytes=_bytes(token.token),
                top_logprobs=[
                    TopLogprob(token=top.token, logprob=top.logprob, bytes=_bytes(top.token))
                    for top in token.top
                ],
            )
            for token in tokens
        ]
    )


def completion(
    *,
    message_id: uuid.UUID,
    text: str,
    end: LoggedEnd,
    logprobs: Sequence[protocol.TokenLogprob] | None = None,
) -> ChatCompletion:
    """`logprobs`: None when the request did not ask for them."""
    faq = faq_marker(end)
    return ChatCompletion(
        id=completion_id(message_id),
        created=int(time.time()),
        model=settings.CHAT_API_MODEL,
        choices=[
            Choice(
                message=AssistantMessage(content=text),
                logprobs=None if logprobs is None else choice_logprobs(logprobs),
                finish_reason=finish_reason(end),
            )
        ],
        usage=usage(end),
        system_fingerprint=FAQ_FINGERPRINT if faq else None,
        x_faq=faq,
    )


class ChunkMaker:
    """The chunks of one streamed answer: same id and `created` on each."""

    def __init__(self, *, message_id: uuid.UUID, include_usage: bool) -> None:
        self._id = completion_id(message_id)
        self._created = int(time.time())
        self._include_usage = include_usage
        self._first = True

    def delta(
        self, text: str, logprobs: Sequence[protocol.TokenLogprob] | None = None
    ) -> ChatCompletionChunk:
        # The first chunk carries the role and the first text together: benchmark clients
        # take the first chunk as the first token.
        delta = ChunkDelta(role="assistant" if self._first else None, content=text)
        self._first = False
        return self._chunk(
            [
                ChunkChoice(
                    delta=delta,
                    logprobs=None if logprobs is None else choice_logprobs(logprobs),
                )
            ]
        )

    def end(self, end: LoggedEnd) -> list[ChatCompletionChunk]:
        faq = faq_marker(end)
        last = self._chunk(
            [
                ChunkChoice(
                    delta=ChunkDelta(role="assistant") if self._first else ChunkDelta(),
                    finish_reason=finish_reason(end),
                )
            ]
        )
        last.system_fingerprint = FAQ_FINGERPRINT if faq else None
        last.x_faq = faq
        chunks = [last]
        if self._include_usage:
            chunks.append(self._chunk([], usage=usage(end)))
        return chunks

    def _chunk(
        self, choices: list[ChunkChoice], *, usage: Usage | None = None
    ) -> ChatCompletionChunk:
        return ChatCompletionChunk(
            id=self._id,
            created=self._created,
            model=settings.CHAT_API_MODEL,
            choices=choices,
            usage=usage,
        )
