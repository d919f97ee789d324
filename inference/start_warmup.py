"""A worker that starts warms its engine and the published templates' prefixes before it
takes chat.

The first request an engine runs is slow (first step, allocations, the plain chat's prefix
not cached: 435 ms against ~100 ms after, measured in Chromium), so the first user would be
the warm-up. The worker first runs a plain chat question (no template) itself.

Publishing a template warms every live worker (`chatapp/prompts/warmup.py`), but a worker that
starts later (a restart, a new replica) would otherwise serve the first user of each template
with a cold prefix cache. So before it joins the registry the worker asks the web side for the
published system prompts (`PrefixListRequest` on `PREFIX_LIST_CHANNEL`) and runs each through
its engine as a one-token request. Bounded: no answer within `ask_timeout_s` (no web process
up yet) or a warm-up longer than `timeout_s` in all, and it starts serving anyway.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from pydantic import ValidationError

from inference.engines.base import Engine
from inference.prefill import engine_prefill
from inference.wire.protocol import (
    BACKGROUND_PRIORITY,
    PREFIX_LIST_CHANNEL,
    ChatTurn,
    GenerateRequest,
    PrefixList,
    PrefixListRequest,
    SamplingOptions,
)
from inference.wire.transport import Transport

logger = logging.getLogger(__name__)


async def engine_warm_at_start(
    *, engine: Engine, transport: Transport, ask_timeout_s: float, timeout_s: float
) -> int:
    """Warm the engine with a plain chat question, then every published system prompt;
    returns how many system prompts were warmed."""
    started = time.monotonic()
    warmed = 0
    prompts: list[str] = []
    try:
        async with asyncio.timeout(timeout_s):
            await _warm_one(engine=engine, system_prompt=None)
            prompts = await _published_prompts(transport=transport, timeout_s=ask_timeout_s)
            for system_prompt in prompts:
                await _warm_one(engine=engine, system_prompt=system_prompt)
                warmed += 1
    except TimeoutError:
        logger.warning("start warm-up: %d of %d prefixes in %g s", warmed, len(prompts), timeout_s)
    except Exception:  # a warm-up is an optimisation: serve anyway
        logger.exception("start warm-up failed after %d of %d prefixes", warmed, len(prompts))
    if prompts:
        logger.info("warmed %d published prefix(es) in %.1f s", warmed, time.monotonic() - started)
    return warmed


async def _published_prompts(*, transport: Transport, timeout_s: float) -> list[str]:
    reply = await transport.new_channel()
    sent = await transport.send(
        PREFIX_LIST_CHANNEL, PrefixListRequest(reply_channel=reply), retry_s=timeout_s
    )
    if not sent:
        return []
    try:
        async with asyncio.timeout(timeout_s):
            raw = await transport.receive(reply)
    except TimeoutError:
        logger.info("start warm-up: no web process answered within %g s", timeout_s)
        return []
    try:
        return PrefixList.model_validate(raw).system_prompts
    except ValidationError:
        logger.warning("start warm-up: malformed prefix list")
        return []


# The plain chat's warm-up question: a typical first question, so the first user's prompt
# shares the chat template's opening with it.
PLAIN_QUESTION = "Hello, can you help me with a question about my order?"


async def _warm_one(*, engine: Engine, system_prompt: str | None) -> None:
    """One request through the engine: a template's system prefix (one token), or with None
    the plain chat, two tokens so that a decode step runs as well as a prefill."""
    plain = system_prompt is None
    request = GenerateRequest(
        request_id=f"start-warmup-{uuid.uuid4()}",
        reply_channel="-",  # nobody: the worker runs it itself
        system=system_prompt,
        messages=[ChatTurn(role="user", content=PLAIN_QUESTION)] if plain else [],
        sampling=SamplingOptions(max_tokens=2 if plain else 1),
        priority=BACKGROUND_PRIORITY,
        submitted_at=time.time(),
    )
    await engine_prefill(engine=engine, request=request)
