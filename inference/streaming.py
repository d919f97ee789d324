"""Coalesce engine deltas into a few frames per second-fraction.

One channel-layer message per token would flood Redis (channels_redis capacity 100 per
channel) and the browser. The first delta goes out at once (time to first token is what users
feel); later ones are merged until `interval_s` has passed since the last flush or `max_tokens`
have piled up. A timer flushes a lone pending delta when the engine pauses, so text never sits
in the buffer waiting for the next token.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Sequence

from inference.engines.base import EngineDelta

_END = object()


def merge_deltas(deltas: Sequence[EngineDelta]) -> EngineDelta:
    last = deltas[-1]
    logprobs = None
    if any(d.logprobs is not None for d in deltas):
        logprobs = tuple(lp for d in deltas for lp in d.logprobs or ())
    return EngineDelta(
        text="".join(d.text for d in deltas),
        tokens=sum(d.tokens for d in deltas),
        finish_reason=last.finish_reason,
        prompt_tokens=last.prompt_tokens,
        cached_prompt_tokens=last.cached_prompt_tokens,
        logprobs=logprobs,
    )


async def coalesce(
    source: AsyncIterator[EngineDelta], *, interval_s: float, max_tokens: int
) -> AsyncGenerator[EngineDelta, None]:
    """Yield merged deltas from `source`; closing this generator cancels `source` (abort)."""
    queue: asyncio.Queue[object] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for delta in source:
                queue.put_nowait(delta)
        except Exception as exc:  # re-raised in the reader below
            queue.put_nowait(exc)
        else:
            queue.put_nowait(_END)

    pump_task = asyncio.create_task(pump())
    loop = asyncio.get_running_loop()
    pending: list[EngineDelta] = []
    last_flush: float | None = None
    try:
        while True:
            deadline = None
            if pending and last_flush is not None:
                deadline = last_flush + interval_s
            try:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns an item that
                # arrived in the same step as a cancel and swallows the cancel (a Stop lost).
                async with asyncio.timeout_at(deadline):
                    item = await queue.get()
            except TimeoutError:
                yield merge_deltas(pending)
                pending, last_flush = [], loop.time()
                continue
            items = [item]
            while not queue.empty():  # take everything already produced in one go
                items.append(queue.get_nowait())
            for entry in items:
                if entry is _END:
                    if pending:
                        yield merge_deltas(pending)
                    return
                if isinstance(entry, Exception):
                    if pending:
                        yield merge_deltas(pending)
                    raise entry
                assert isinstance(entry, EngineDelta)
                pending.append(entry)
            now = loop.time()
            if (
                last_flush is None
                or now - last_flush >= interval_s
                or sum(d.tokens for d in pending) >= max_tokens
            ):
                yield merge_deltas(pending)
                pending, last_flush = [], now
    finally:
        pump_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pump_task
