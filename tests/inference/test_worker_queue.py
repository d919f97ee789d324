"""Workers on the real Redis request queue (db 10): every request served by exactly one worker,
a request a killed worker took served by another, a clean stop that finishes what runs and
leaves the queue to the others, and a request that keeps killing workers failed, not retried
forever. Replies travel on an in-memory channel layer; the queue is the real one."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from channels.layers import InMemoryChannelLayer

from inference.engines.scripted import ScriptedEngine
from inference.intake import MAX_DELIVERIES
from inference.wire.protocol import (
    REQUEST_CHANNEL,
    ChatTurn,
    GenerateRequest,
    worker_event_adapter,
)
from inference.wire.stream_queue import RedisStreamQueue
from inference.wire.transport import Transport
from inference.worker import InferenceWorker
from tests.support.embedded import fresh_registry
from tests.support.workers import worker_settings

pytestmark = pytest.mark.redis

REDIS_URL = "redis://127.0.0.1:6379/10"
RECLAIM_S = 0.3


class Fleet:
    """Workers in this process sharing one Redis queue and one in-memory reply layer."""

    def __init__(self) -> None:
        self.layer = InMemoryChannelLayer(capacity=10_000)
        self.registry = fresh_registry()
        self.queues: list[RedisStreamQueue] = []
        self.running: list[tuple[InferenceWorker, asyncio.Task[None]]] = []

    def queue(self) -> RedisStreamQueue:
        queue = RedisStreamQueue(redis_url=REDIS_URL, reclaim_after_s=RECLAIM_S)
        self.queues.append(queue)
        return queue

    async def start(self, **settings: Any) -> tuple[InferenceWorker, asyncio.Task[None]]:
        worker = InferenceWorker(
            engine=ScriptedEngine(delay_s=0.005),
            transport=Transport(layer=self.layer),
            settings=worker_settings(reclaim_after_s=RECLAIM_S, **settings),
            registry=self.registry,
            queue=self.queue(),  # a queue (connections) per worker, as per process
        )
        task = asyncio.create_task(worker.run())
        await asyncio.wait_for(worker.ready.wait(), 5)
        self.running.append((worker, task))
        return worker, task

    async def ask(self, text: str, request_id: str) -> str:
        reply: str = await self.layer.new_channel()
        request = GenerateRequest(
            request_id=request_id,
            reply_channel=reply,
            messages=[ChatTurn(role="user", content=text)],
            submitted_at=time.time(),
        )
        await self.queues[0].put(REQUEST_CHANNEL, request.to_channel())
        return reply

    async def events(self, reply: str, timeout_s: float = 10.0) -> list[Any]:
        events = []
        async with asyncio.timeout(timeout_s):
            while True:
                event = worker_event_adapter.validate_python(await self.layer.receive(reply))
                events.append(event)
                if event.type in ("inference.done", "inference.error"):
                    return events

    async def close(self) -> None:
        for _, task in self.running:
            task.cancel()
        await asyncio.gather(*(task for _, task in self.running), return_exceptions=True)
        for queue in self.queues:
            await queue.aclose()


@pytest.fixture
async def fleet(redis_db: aioredis.Redis) -> AsyncIterator[Fleet]:
    made = Fleet()
    made.queue()  # the requesters' own
    yield made
    await made.close()


async def test_three_workers_serve_each_of_300_requests_exactly_once(fleet: Fleet) -> None:
    workers = [(await fleet.start(max_active=8))[0] for _ in range(3)]
    replies = [await fleet.ask(f"question {n}", f"q{n}") for n in range(300)]
    answers = await asyncio.gather(*(fleet.events(reply, 60) for reply in replies))

    for n, events in enumerate(answers):
        accepted = [e for e in events if e.type == "inference.accepted"]
        assert len(accepted) == 1, events[:3]
        assert events[-1].type == "inference.done"
        text = "".join(e.text for e in events if e.type == "inference.delta")
        assert text == f"You said: question {n}"
    assert sum(w.requests_accepted for w in workers) == 300
    assert all(w.requests_accepted > 0 for w in workers)  # they shared the load
    assert await fleet.queues[0].depth(REQUEST_CHANNEL) == 0


async def test_a_request_taken_by_a_killed_worker_is_answered_by_another(fleet: Fleet) -> None:
    reply = await fleet.ask("are you there?", "orphan")
    # a worker took it and was killed (-9) before it could accept it
    killed = await fleet.queue().take(REQUEST_CHANNEL, consumer="killed-worker")
    assert killed.message["request_id"] == "orphan"
    started = time.monotonic()
    worker, _ = await fleet.start()

    events = await fleet.events(reply)
    assert events[0].type == "inference.accepted"
    assert events[0].worker_channel == worker.channel
    assert "".join(e.text for e in events if e.type == "inference.delta") == (
        "You said: are you there?"
    )
    assert time.monotonic() - started < RECLAIM_S + 3


async def test_a_stopping_worker_finishes_its_answer_and_leaves_the_queue_to_others(
    fleet: Fleet,
) -> None:
    stopping, stopping_task = await fleet.start(max_active=1)
    running = await fleet.ask("[[slow]] " + "w " * 20, "running")  # ~1 s of words
    accepted = worker_event_adapter.validate_python(await fleet.layer.receive(running))
    assert accepted.type == "inference.accepted"

    drain = asyncio.create_task(stopping.drain(timeout_s=10))
    await asyncio.sleep(0.1)
    # admission stops counting it at once; it stays announced, so its answer is not taken
    # for a dead worker's and moved elsewhere
    assert await fleet.registry.live_workers() == {stopping.channel: 0}
    waiting = await fleet.ask("next please", "waiting")
    await asyncio.sleep(0.3)
    assert stopping.requests_accepted == 1  # it takes nothing more

    events = await fleet.events(running)
    assert events[-1].type == "inference.done"
    assert events[-1].finish_reason != "abort"  # finished, not cut off
    await asyncio.wait_for(drain, 5)
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(stopping_task, 5)

    other, _ = await fleet.start()
    events = await fleet.events(waiting)
    assert events[0].worker_channel == other.channel
    assert events[-1].type == "inference.done"


async def test_a_worker_stopped_while_taking_hands_the_request_back_at_once(
    fleet: Fleet,
) -> None:
    """Stopped between taking a request and accepting it: the next worker need not wait for
    the reclaim age."""
    queue = fleet.queue()
    await fleet.ask("hello", "handed")
    taken = await queue.take(REQUEST_CHANNEL, consumer="stopping-worker")
    assert await queue.hand_back_all(REQUEST_CHANNEL, consumer="stopping-worker") == 1
    slow_reclaim = RedisStreamQueue(redis_url=REDIS_URL, reclaim_after_s=60)
    fleet.queues.append(slow_reclaim)
    again = await asyncio.wait_for(slow_reclaim.take(REQUEST_CHANNEL, consumer="next"), 3)
    assert again.entry_id == taken.entry_id
    assert await slow_reclaim.accept(again)


async def test_a_request_that_keeps_killing_workers_is_failed_not_retried_forever(
    fleet: Fleet,
) -> None:
    reply = await fleet.ask("a question that kills", "poison")
    queue = fleet.queue()
    for n in range(MAX_DELIVERIES):  # each taker died with it
        await asyncio.sleep(RECLAIM_S if n else 0)
        await asyncio.wait_for(queue.take(REQUEST_CHANNEL, consumer=f"dead-{n}"), 3)
    worker, _ = await fleet.start()

    events = await fleet.events(reply)
    assert [e.type for e in events] == ["inference.error"]
    assert events[0].code == "internal"
    assert "stopped 3 inference workers" in events[0].message
    assert worker.requests_accepted == 0
    assert await fleet.queues[0].depth(REQUEST_CHANNEL) == 0
