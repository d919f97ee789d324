"""Driving a worker on the real vLLM engine over the in-memory channel layer."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from channels.layers import InMemoryChannelLayer

from inference.wire.protocol import ChatTurn, GenerateRequest, SamplingOptions, worker_event_adapter

# ~700 tokens of text two users share, e.g. the same long pasted policy
SHARED = " ".join(
    f"Clause {i}: refunds are issued within {i % 9 + 2} business days." for i in range(60)
)


def fresh(text: str) -> str:
    """`text` behind a unique first line: a prefix no earlier request can have cached."""
    return f"Case {uuid.uuid4().hex}. {text}"


def request(reply: str, text: str, *, max_tokens: int = 8) -> dict[str, Any]:
    return GenerateRequest(
        request_id=str(uuid.uuid4()),
        reply_channel=reply,
        messages=[ChatTurn(role="user", content=text)],
        sampling=SamplingOptions(max_tokens=max_tokens),
        submitted_at=time.time(),
    ).to_channel()


async def run_to_end(layer: InMemoryChannelLayer, reply: str) -> list[Any]:
    events = []
    while True:
        event = worker_event_adapter.validate_python(
            await asyncio.wait_for(layer.receive(reply), 60)
        )
        events.append(event)
        if event.type in ("inference.done", "inference.error"):
            return events


async def next_event(layer: InMemoryChannelLayer, reply: str) -> Any:
    """The next event that is not a heartbeat (a slow prefill on a busy machine sends some)."""
    while True:
        event = worker_event_adapter.validate_python(
            await asyncio.wait_for(layer.receive(reply), 60)
        )
        if event.type != "inference.heartbeat":
            return event
