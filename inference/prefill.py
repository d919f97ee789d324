"""Running a prompt through the engine for its prefix cache only: one request, nothing sent.

Used by a starting worker's warm-up (`inference/start_warmup.py`) and by typing prefill
(`PrefillRequest`, run by the worker in a background slot).
"""

from __future__ import annotations

import asyncio

from prometheus_client import Counter

from inference.engine_request import engine_request_of
from inference.engines.base import Engine
from inference.protocol import GenerateRequest

TYPING_PREFILLS = Counter(
    "inference_typing_prefills",
    "Typing prefills a worker took, by what became of them: run, dropped_stale (older than "
    "PREFILL_MAX_AGE_S), dropped_busy (the worker was answering chat), failed.",
    ["outcome"],
)


async def engine_prefill(*, engine: Engine, request: GenerateRequest) -> None:
    """Render `request`'s prompt and run it to its end (it asks for a token or two)."""
    engine_request = await asyncio.to_thread(
        engine_request_of, request, builder=engine.prompt_builder, defaults=engine.defaults
    )
    async for _delta in engine.stream(engine_request):
        pass
