"""A worker's requests and events on an in-memory channel layer, for the worker tests: a
worker running for a block, a request put on the shared queue, the events that answer it,
the metrics page a standalone worker serves."""

from __future__ import annotations

import asyncio
import contextlib
import time
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

from inference.metrics import serve_metrics
from inference.wire.protocol import (
    REQUEST_CHANNEL,
    Accepted,
    ChatTurn,
    GenerateRequest,
    worker_event_adapter,
)
from inference.worker import InferenceWorker
from tests.support.embedded import embedded_queue
from tests.support.net import free_port


@contextlib.asynccontextmanager
async def running(
    worker: InferenceWorker, *, ready_timeout_s: float | None = None
) -> AsyncIterator[InferenceWorker]:
    """`worker.run()` as a task for the block, which starts once the worker is ready (within
    `ready_timeout_s`, if given); cancelled when the block ends."""
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(worker.ready.wait(), ready_timeout_s)
        yield worker
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def generate(reply: str, text: str, request_id: str = "r1", **extra: Any) -> dict[str, Any]:
    """A one-turn generate request for `text` (extras: GenerateRequest's other fields)."""
    return GenerateRequest(
        request_id=request_id,
        reply_channel=reply,
        messages=[ChatTurn(role="user", content=text)],
        submitted_at=time.time(),
        **extra,
    ).to_channel()


async def ask(layer: Any, text: str, **extra: Any) -> str:
    """Queue a request for `text` (`generate`'s extras) with a new reply channel; returns it."""
    reply: str = await layer.new_channel()
    await embedded_queue().put(REQUEST_CHANNEL, generate(reply, text, **extra))
    return reply


async def collect(layer: Any, channel: str, timeout_s: float = 5.0) -> list[Any]:
    """Events up to and including Done or Error, within `timeout_s` in all (heartbeats alone
    never end it)."""
    events = []
    deadline = time.monotonic() + timeout_s
    while True:
        event = worker_event_adapter.validate_python(
            await asyncio.wait_for(layer.receive(channel), max(0.0, deadline - time.monotonic()))
        )
        events.append(event)
        if event.type in ("inference.done", "inference.error"):
            return events


async def accepted_on(layer: Any, reply: str) -> Accepted:
    """The first event on `reply`, which must be the worker's Accepted."""
    event = worker_event_adapter.validate_python(await layer.receive(reply))
    assert isinstance(event, Accepted)
    return event


async def metrics_page() -> str:
    """What a metrics server (`serve_metrics`, as a standalone worker starts one; here on a free
    port) serves at /metrics now."""
    port = free_port()
    server = serve_metrics(host="127.0.0.1", port=port)
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        body: bytes = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read())
    finally:
        server.shutdown()
        server.server_close()
    return body.decode()
