"""Warm vLLM's prefix cache with a template's system prefix: one low-priority, one-token
request through the normal worker path, so the first real user already hits the cache."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

from channels.layers import get_channel_layer
from django.conf import settings

from inference.protocol import (
    BACKGROUND_CHANNEL,
    BACKGROUND_PRIORITY,
    Done,
    Error,
    GenerateRequest,
    SamplingOptions,
    worker_event_adapter,
)
from inference.request_queue import local_request_queue, request_queue

# Background work: behind chat in vLLM's scheduler, and capped per worker (see the worker).
WARMUP_PRIORITY = BACKGROUND_PRIORITY


@dataclass(frozen=True, slots=True)
class WarmResult:
    prompt_tokens: int
    cached_prompt_tokens: int


class WarmupFailed(Exception):
    pass


async def warm_prefix(*, system_prompt: str, timeout_s: float) -> WarmResult:
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
    queue = request_queue(redis_url=settings.REDIS_URL)
    try:
        entry_id = await queue.put(BACKGROUND_CHANNEL, request.to_channel())
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
        await queue.withdraw(BACKGROUND_CHANNEL, entry_id)  # no worker starts it later
        raise WarmupFailed(f"no inference worker answered within {timeout_s:g} s") from exc
    finally:
        if queue is not local_request_queue():
            await queue.aclose()
