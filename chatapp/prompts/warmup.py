"""Warm vLLM's prefix cache with a template's system prefix: one low-priority, one-token
request through the normal worker path on every live worker, so the first real user already
hits the cache whichever worker serves them."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

from channels.layers import get_channel_layer
from django.conf import settings

from inference.wire.protocol import (
    BACKGROUND_CHANNEL,
    BACKGROUND_PRIORITY,
    Done,
    Error,
    GenerateRequest,
    SamplingOptions,
    worker_event_adapter,
)
from inference.wire.registry import worker_registry
from inference.wire.request_queue import request_queue, worker_queue

# Background work: behind chat in vLLM's scheduler, and capped per worker (see the worker).
WARMUP_PRIORITY = BACKGROUND_PRIORITY


@dataclass(frozen=True, slots=True)
class WarmResult:
    prompt_tokens: int
    cached_prompt_tokens: int  # the least any worker had cached already
    workers: int = 1  # warmed
    failures: tuple[str, ...] = ()  # one per live worker that did not answer


class WarmupFailed(Exception):
    pass


async def warm_prefix(*, system_prompt: str, timeout_s: float) -> WarmResult:
    """Warm every live worker's prefix cache (each on its own queue: prefix caches are per
    engine); with no worker registered, whichever worker takes it from the shared queue.
    Raises WarmupFailed only when no worker was warmed."""
    registry = worker_registry(redis_url=settings.REDIS_URL)
    try:
        workers = sorted(await registry.live_workers())
    finally:
        await registry.aclose()
    queues = [worker_queue(BACKGROUND_CHANNEL, worker) for worker in workers]
    outcomes = await asyncio.gather(
        *(
            _warm_on(queue, system_prompt=system_prompt, timeout_s=timeout_s)
            for queue in queues or [BACKGROUND_CHANNEL]
        ),
        return_exceptions=True,
    )
    warmed = [o for o in outcomes if isinstance(o, WarmResult)]
    failures = tuple(
        str(o) if isinstance(o, WarmupFailed) else f"{type(o).__name__}: {o}"
        for o in outcomes
        if isinstance(o, BaseException)
    )
    if not warmed:
        raise WarmupFailed(failures[0] if failures else "no inference worker")
    return WarmResult(
        prompt_tokens=warmed[0].prompt_tokens,
        cached_prompt_tokens=min(w.cached_prompt_tokens for w in warmed),
        workers=len(warmed),
        failures=failures,
    )


async def _warm_on(queue: str, *, system_prompt: str, timeout_s: float) -> WarmResult:
    layer = get_channel_layer()
    reply = await layer.new_channel()  # the default prefix: see AnswerRelay.run
    request = GenerateRequest(
        request_id=f"warmup-{uuid.uuid4()}",
        reply_channel=reply,
        system=system_prompt,
        messages=[],
        sampling=SamplingOptions(max_tokens=1),
        priority=WARMUP_PRIORITY,
        submitted_at=time.time(),
    )
    requests = request_queue(redis_url=settings.REDIS_URL)
    try:
        entry_id = await requests.put(queue, request.to_channel())
        async with asyncio.timeout(timeout_s):
            while True:
                event = worker_event_adapter.validate_python(await layer.receive(reply))
                if isinstance(event, Done):
                    return WarmResult(
                        prompt_tokens=event.prompt_tokens,
                        cached_prompt_tokens=event.cached_prompt_tokens,
                    )
                if isinstance(event, Error):
                    raise WarmupFailed(event.message)
    except TimeoutError as exc:
        await requests.withdraw(queue, entry_id)  # no worker starts it later
        raise WarmupFailed(f"no inference worker answered within {timeout_s:g} s") from exc
    finally:
        await requests.aclose()
