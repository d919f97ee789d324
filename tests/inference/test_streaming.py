"""Coalescing: first token at once, later ones merged, nothing held back when the engine pauses."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from inference.engines.base import EngineDelta
from inference.streaming import coalesce


def delta(text: str, finish: str | None = None) -> EngineDelta:
    return EngineDelta(
        text=text,
        tokens=1,
        finish_reason=finish,  # type: ignore[arg-type]
        prompt_tokens=5,
        cached_prompt_tokens=0,
    )


async def paced(texts: list[str], gap_s: float) -> AsyncIterator[EngineDelta]:
    for index, text in enumerate(texts):
        await asyncio.sleep(gap_s)
        yield delta(text, "stop" if index == len(texts) - 1 else None)


async def test_fast_tokens_are_merged_into_few_frames_without_losing_text() -> None:
    texts = [f"t{i} " for i in range(200)]
    frames = [d async for d in coalesce(paced(texts, 0.0005), interval_s=0.02, max_tokens=1000)]
    assert "".join(f.text for f in frames) == "".join(texts)
    assert sum(f.tokens for f in frames) == 200
    assert len(frames) < 40
    assert frames[0].text == "t0 "  # the first token is never held back
    assert frames[-1].finish_reason == "stop"


async def test_token_cap_flushes_even_within_the_interval() -> None:
    texts = [f"{i}," for i in range(64)]
    frames = [d async for d in coalesce(paced(texts, 0.002), interval_s=10, max_tokens=8)]
    assert "".join(f.text for f in frames) == "".join(texts)
    # without the cap, a 10 s interval would hold everything after the first token
    assert len(frames) >= 6


async def test_a_pending_token_is_flushed_when_the_engine_pauses() -> None:
    async def pausing() -> AsyncIterator[EngineDelta]:
        yield delta("a")
        yield delta("b")  # arrives within the interval: pending
        await asyncio.sleep(0.5)  # engine stalls
        yield delta("c", "stop")

    arrivals: list[tuple[str, float]] = []
    start = time.monotonic()
    async for frame in coalesce(pausing(), interval_s=0.03, max_tokens=100):
        arrivals.append((frame.text, time.monotonic() - start))
    texts = [text for text, _ in arrivals]
    assert "".join(texts) == "abc"
    b_time = next(t for text, t in arrivals if "b" in text)
    assert b_time < 0.3, "pending text waited for the next token"


async def test_engine_errors_surface_after_the_text_so_far() -> None:
    async def failing() -> AsyncIterator[EngineDelta]:
        yield delta("partial")
        raise RuntimeError("boom")

    seen: list[str] = []
    with pytest.raises(RuntimeError, match="boom"):
        async for frame in coalesce(failing(), interval_s=0.01, max_tokens=4):
            seen.append(frame.text)
    assert "".join(seen) == "partial"


async def test_closing_the_coalescer_cancels_the_engine_stream() -> None:
    closed = asyncio.Event()

    async def endless() -> AsyncIterator[EngineDelta]:
        try:
            while True:
                await asyncio.sleep(0.001)
                yield delta("x")
        finally:
            closed.set()

    stream = coalesce(endless(), interval_s=0.005, max_tokens=4)
    await anext(stream)
    await stream.aclose()
    await asyncio.wait_for(closed.wait(), 1)


async def test_a_stop_that_comes_as_a_token_arrives_is_not_lost() -> None:
    """Stop (cancelling the reader) in the same loop step as a token arriving while another
    token is held back: the reader must end, not swallow the cancel and stream to the end
    (`asyncio.wait_for` on Python 3.11 returns the result then; a long answer ran to its
    length limit after Stop)."""
    reader: asyncio.Task[list[str]] | None = None
    engine_closed = asyncio.Event()

    async def engine() -> AsyncIterator[EngineDelta]:
        try:
            yield delta("a")  # flushed at once
            await asyncio.sleep(0.05)
            yield delta("b")  # within the interval: held back, so the reader waits with a timeout
            await asyncio.sleep(0.05)
            yield delta("c")  # put in the queue; then, before the reader runs again, Stop:
            assert reader is not None
            reader.cancel()
            await asyncio.sleep(3600)
            yield delta("never")
        finally:
            engine_closed.set()

    async def read() -> list[str]:
        return [d.text async for d in coalesce(engine(), interval_s=10, max_tokens=100)]

    reader = asyncio.create_task(read())
    done, _ = await asyncio.wait({reader}, timeout=2)
    assert done, "the stop was swallowed: the reader still waits for the engine"
    assert reader.cancelled()
    await asyncio.wait_for(engine_closed.wait(), 1)  # and the engine stream was closed (abort)
