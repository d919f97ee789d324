"""Server-sent events for a streamed answer: `data: {chunk}` per relay entry, then
`data: [DONE]`. An answer that fails after the stream started ends with
`data: {"error": {...}}` (what OpenAI's clients raise as an APIError), then `[DONE]`.

The stream starts at once, before the model: the headers and a `: waiting` comment go out
as soon as the answer is admitted, and another comment every `keepalive_s` while the first
token is awaited (a long queue or prefill), so a client or a proxy never sits on a silent
connection. SSE clients (OpenAI's included) skip comment lines."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from chatapp.answers.entries import LogEntry, LoggedDelta
from chatapp.openai_api.answers import ApiAnswer
from chatapp.openai_api.errors import answer_failed
from chatapp.openai_api.responses import ChunkMaker
from chatapp.openai_api.schemas import ChatCompletionChunk

DONE = b"data: [DONE]\n\n"
KEEPALIVE = b": waiting for the model\n\n"


def sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"


def chunk_payload(chunk: ChatCompletionChunk, *, include_usage: bool) -> dict[str, Any]:
    payload = chunk.model_dump(mode="json")
    for choice in payload["choices"]:
        choice["delta"] = {k: v for k, v in choice["delta"].items() if v is not None}
    if payload["x_faq"] is None:
        del payload["x_faq"]
    if not include_usage:
        del payload["usage"]  # OpenAI sends `usage` (null until the last chunk) only if asked
    return payload


async def sse_stream(
    answer: ApiAnswer,
    *,
    entries: AsyncIterator[LogEntry],
    include_usage: bool,
    retry_after_s: float,
    keepalive_s: float,
    logprobs: bool = False,
) -> AsyncIterator[bytes]:
    """The response body. Leaving early (the client disconnected: Django cancels the task
    that reads this) stops the answer, which aborts the engine request. `logprobs`: the
    request asked for them, so each text chunk carries its tokens'."""
    maker = ChunkMaker(message_id=answer.message_id, include_usage=include_usage)
    rest = entries
    first = asyncio.ensure_future(anext(rest, None))
    try:
        yield KEEPALIVE
        while not (await asyncio.wait({first}, timeout=keepalive_s))[0]:
            yield KEEPALIVE
        entry: LogEntry | None = first.result()
        while entry is not None:
            if isinstance(entry, LoggedDelta):
                tokens = (entry.logprobs or []) if logprobs else None
                chunk = maker.delta(entry.text, tokens)
                yield sse(chunk_payload(chunk, include_usage=include_usage))
            elif entry.status == "failed":
                error = answer_failed(entry, retry_after_s=retry_after_s)
                yield sse(error.body())
                yield DONE
                return
            else:
                for chunk in maker.end(entry):
                    yield sse(chunk_payload(chunk, include_usage=include_usage))
                yield DONE
                return
            entry = await anext(rest, None)
    finally:
        if not first.done():
            first.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await first
        await answer.close()
