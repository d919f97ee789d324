"""The worker over a real in-memory channel layer with the scripted engine."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from channels.layers import InMemoryChannelLayer

from inference.engines.scripted import ScriptedEngine
from inference.wire.protocol import (
    REQUEST_CHANNEL,
    CancelRequest,
    ChatTurn,
    GenerateRequest,
    worker_event_adapter,
)
from inference.wire.transport import Transport
from inference.worker import InferenceWorker
from tests.inference.worker_events import accepted_on, ask, collect, generate, running
from tests.support.embedded import embedded_queue, fresh_registry
from tests.support.workers import worker_settings


@pytest.fixture
async def worker(
    layer: InMemoryChannelLayer, engine: ScriptedEngine
) -> AsyncIterator[InferenceWorker]:
    worker = InferenceWorker(
        engine=engine, transport=Transport(layer=layer), settings=worker_settings(max_active=2)
    )
    async with running(worker):
        yield worker


async def test_a_request_streams_accepted_deltas_and_done(
    layer: InMemoryChannelLayer, worker: InferenceWorker
) -> None:
    reply = await ask(layer, "one two three")
    events = await collect(layer, reply)

    assert events[0].type == "inference.accepted"
    assert events[0].worker_channel == worker.channel
    deltas = [e for e in events if e.type == "inference.delta"]
    assert "".join(d.text for d in deltas) == "You said: one two three"
    done = events[-1]
    assert done.type == "inference.done"
    assert done.seq == deltas[-1].seq + 1
    assert done.completion_tokens == 5
    assert done.finish_reason == "stop"
    assert done.ttft_ms is not None
    assert done.ttft_ms <= done.total_ms


async def test_a_nul_character_from_the_engine_is_not_streamed(
    layer: InMemoryChannelLayer, worker: InferenceWorker
) -> None:
    # the scripted engine says back what it was told; a real model can emit NUL too (a
    # byte-fallback token), and PostgreSQL cannot store an answer holding it
    reply = await ask(layer, "one \x00two")
    deltas = [e for e in await collect(layer, reply) if e.type == "inference.delta"]
    assert "".join(d.text for d in deltas) == "You said: one two"


async def test_cancel_on_the_worker_channel_aborts(
    layer: InMemoryChannelLayer, worker: InferenceWorker, engine: ScriptedEngine
) -> None:
    reply = await ask(layer, "[[slow]] " + "w " * 100)
    accepted = await accepted_on(layer, reply)
    await layer.send(accepted.worker_channel, CancelRequest(request_id="r1").to_channel())
    events = await collect(layer, reply)
    assert events[-1].type == "inference.done"
    assert events[-1].finish_reason == "abort"
    assert engine.stats().running_requests == 0
    assert worker.active_requests == 0


async def test_a_malformed_request_gets_a_typed_error(
    layer: InMemoryChannelLayer, worker: InferenceWorker
) -> None:
    reply = await layer.new_channel()
    await embedded_queue().put(
        REQUEST_CHANNEL,
        {"type": "inference.generate", "request_id": "bad", "reply_channel": reply, "messages": []},
    )
    event = worker_event_adapter.validate_python(await asyncio.wait_for(layer.receive(reply), 5))
    assert event.type == "inference.error"
    assert event.code == "invalid_request"
    # the worker keeps serving
    await embedded_queue().put(REQUEST_CHANNEL, generate(reply, "ok", request_id="good"))
    assert (await collect(layer, reply))[-1].type == "inference.done"


async def test_a_malformed_request_is_logged_without_what_the_user_wrote(
    layer: InMemoryChannelLayer, worker: InferenceWorker, caplog: pytest.LogCaptureFixture
) -> None:
    """Logs are shipped and kept longer than conversations: a validation error names the
    fields and what is wrong with them, never their values (a customer's message)."""
    reply = await layer.new_channel()
    secret = "my card number is 4111 1111 1111 1111"
    bad_turn = {"role": "customer", "content": secret}  # an unknown role
    with caplog.at_level(logging.WARNING, logger="inference.intake"):
        await embedded_queue().put(
            REQUEST_CHANNEL,
            {
                "type": "inference.generate",
                "request_id": "bad",
                "reply_channel": reply,
                "messages": [bad_turn],
            },
        )
        await asyncio.wait_for(layer.receive(reply), 5)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "malformed generate request" in logged
    assert "messages" in logged  # which field
    assert "4111" not in logged
    assert "customer" not in logged


async def test_a_worker_takes_no_more_than_its_slots(
    layer: InMemoryChannelLayer, worker: InferenceWorker
) -> None:
    replies = [await layer.new_channel() for _ in range(3)]
    for index, reply in enumerate(replies):
        await embedded_queue().put(
            REQUEST_CHANNEL, generate(reply, "[[slow]] a b c d e f", request_id=f"r{index}")
        )
    await asyncio.sleep(0.2)
    assert worker.active_requests == 2  # the third waits in the channel for a free slot
    results = await asyncio.gather(*(collect(layer, reply) for reply in replies))
    assert all(events[-1].type == "inference.done" for events in results)


async def test_several_workers_share_one_request_channel(layer: InMemoryChannelLayer) -> None:
    workers = [
        InferenceWorker(
            engine=ScriptedEngine(),
            transport=Transport(layer=layer),
            settings=worker_settings(max_active=1),
        )
        for _ in range(2)
    ]
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        for w in workers:
            await w.ready.wait()
        replies = [await layer.new_channel() for _ in range(4)]
        for index, reply in enumerate(replies):
            await embedded_queue().put(
                REQUEST_CHANNEL, generate(reply, "[[slow]] a b c", request_id=f"s{index}")
            )
        results = await asyncio.gather(*(collect(layer, reply) for reply in replies))
        assert all(events[-1].type == "inference.done" for events in results)
        served_by = {events[0].worker_channel for events in results}
        assert served_by == {w.channel for w in workers}  # both took work
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_background_work_never_takes_more_than_its_share_of_the_slots(
    layer: InMemoryChannelLayer, engine: ScriptedEngine
) -> None:
    from inference.wire.protocol import BACKGROUND_CHANNEL, BACKGROUND_PRIORITY

    worker = InferenceWorker(
        engine=engine,
        transport=Transport(layer=layer),
        settings=worker_settings(max_active=3, max_background=1),
    )
    async with running(worker):
        reply = await layer.new_channel()
        for n in range(3):  # a batch of slow background jobs
            job = GenerateRequest(
                request_id=f"bg{n}",
                reply_channel=reply,
                messages=[ChatTurn(role="user", content="[[slow]] " + "w " * 30)],
                priority=BACKGROUND_PRIORITY,
                submitted_at=time.time(),
            )
            await embedded_queue().put(BACKGROUND_CHANNEL, job.to_channel())
        await asyncio.sleep(0.2)
        assert worker.active_requests == 1  # the other two wait: the cap is one

        chat = await layer.new_channel()
        started = time.monotonic()
        await embedded_queue().put(
            REQUEST_CHANNEL, generate(chat, "hello there", request_id="chat")
        )
        events = await collect(layer, chat)
        assert events[-1].type == "inference.done"
        assert time.monotonic() - started < 1.0  # chat did not queue behind the batch
        assert len(engine.prompts) == 2  # still only one background job had started


async def test_the_worker_announces_its_capacity_and_withdraws_when_it_stops(
    layer: InMemoryChannelLayer, engine: ScriptedEngine
) -> None:

    registry = fresh_registry()
    worker = InferenceWorker(
        engine=engine,
        transport=Transport(layer=layer),
        settings=worker_settings(max_active=3, max_queue=5),
        registry=registry,
    )
    task = asyncio.create_task(worker.run())
    await worker.ready.wait()
    await asyncio.sleep(0.05)
    assert await registry.capacity() == 8  # running slots + its share of the queue
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert await registry.capacity() == 0


async def test_a_worker_is_in_the_registry_when_it_says_ready(layer: InMemoryChannelLayer) -> None:
    # Admission reads the registry: a question sent the moment a worker is ready must find it
    # (CI saw `no_worker` for the first question after a test's worker started).
    registry = fresh_registry()
    announced: list[str] = []
    announce = registry.announce

    async def recorded(**fields: Any) -> None:
        await announce(**fields)
        announced.append(fields["worker_id"])

    registry.announce = recorded  # type: ignore[method-assign]
    worker = InferenceWorker(
        engine=ScriptedEngine(),
        transport=Transport(layer=layer),
        settings=worker_settings(),
        registry=registry,
    )
    task = asyncio.create_task(worker.run())
    try:
        await worker.ready.wait()
        assert announced == [worker.channel]  # done, not just started, when it says ready
        assert await registry.capacity() > 0
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await registry.aclose()
