"""The request queue's contract, on the embedded Redis and on a Redis server (db 10, flushed
around each test): one taker per request, re-delivery of what a taker never accepted, hand-back,
withdrawal, no expiry, and a put that a retry cannot double."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from inference.wire.request_queue import RequestQueue
from inference.wire.stream_queue import GROUP, KEY_PREFIX, RedisStreamQueue
from tests.inference.redis_db import EMBEDDED_AND_SERVER, flushed_redis, server_url

REDIS_URL = "redis://127.0.0.1:6379/10"
RECLAIM_S = 0.3


@pytest.fixture(params=EMBEDDED_AND_SERVER)
async def queue(request: pytest.FixtureRequest) -> AsyncIterator[RedisStreamQueue]:
    url = server_url(request.param, REDIS_URL)
    async with flushed_redis(url):
        made = RedisStreamQueue(redis_url=url, reclaim_after_s=RECLAIM_S)
        yield made
        await made.aclose()


@pytest.fixture
async def redis_queue(redis_db: aioredis.Redis) -> AsyncIterator[RedisStreamQueue]:
    """The Redis queue alone, for what only it does (re-delivery, expiry, a lost Redis)."""
    made = RedisStreamQueue(redis_url=REDIS_URL, reclaim_after_s=RECLAIM_S)
    yield made
    await made.aclose()


def job(n: int) -> dict[str, Any]:
    return {"type": "inference.generate", "request_id": f"r{n}", "n": n}


async def take(queue: RequestQueue, consumer: str, timeout: float = 3.0) -> Any:
    return await asyncio.wait_for(queue.take("q", consumer=consumer), timeout)


async def test_each_request_is_taken_by_one_of_many_takers_in_order(queue: RequestQueue) -> None:
    for n in range(60):
        await queue.put("q", job(n))
    got: dict[str, list[int]] = {f"w{i}": [] for i in range(3)}

    async def worker(name: str) -> None:
        while sum(len(v) for v in got.values()) < 60:
            try:
                taken = await take(queue, name, timeout=1.5)
            except TimeoutError:
                continue
            assert await queue.accept(taken)
            got[name].append(taken.message["n"])

    await asyncio.wait_for(asyncio.gather(*(worker(name) for name in got)), 20)
    served = sorted(n for ns in got.values() for n in ns)
    assert served == list(range(60))  # every one, none twice
    assert all(ns == sorted(ns) for ns in got.values())  # each taker sees queue order
    assert await queue.depth("q") == 0


@pytest.mark.redis
async def test_a_retried_put_of_the_same_request_adds_nothing(
    redis_queue: RedisStreamQueue,
) -> None:
    """redis-py retries a command whose connection broke; the first try may have run."""
    first = await redis_queue.put("q", job(1))
    again = await redis_queue.put("q", job(1))
    assert first == again
    assert await redis_queue.depth("q") == 1


@pytest.mark.redis
async def test_a_request_taken_by_a_taker_that_died_is_served_by_another(
    redis_queue: RedisStreamQueue,
) -> None:
    await redis_queue.put("q", job(1))
    dead = await take(redis_queue, "killed-worker")  # taken, never accepted: killed -9
    again = await take(redis_queue, "live-worker")
    assert again.entry_id == dead.entry_id
    assert again.deliveries == 2
    # the dead taker's late accept (it was only frozen) loses: one server, not two
    assert not await redis_queue.accept(dead)
    assert await redis_queue.accept(again)
    assert await redis_queue.accept(again)  # a retried accept (lost reply) still succeeds
    assert await redis_queue.depth("q") == 0


@pytest.mark.redis
async def test_a_dead_takers_request_behind_many_fresh_ones_is_still_reclaimed(
    redis_queue: RedisStreamQueue,
    redis_db: aioredis.Redis,
) -> None:
    """Takers waiting for a slot hold their requests taken but not yet accepted; a request
    held by a killed taker behind more than ten of those must still be reclaimed (Redis
    looks at about ten pending entries per XAUTOCLAIM call: the scan has to go on)."""
    for n in range(13):
        await redis_queue.put("q", job(n))
    fresh = [await take(redis_queue, f"waiting-{n}") for n in range(12)]
    dead = await take(redis_queue, "killed-worker")
    await asyncio.sleep(RECLAIM_S + 0.1)

    async def keep_fresh() -> None:  # the waiting takers are alive: never idle for long
        while True:
            ids = [t.entry_id for t in fresh]
            await redis_db.xclaim(f"{KEY_PREFIX}q", GROUP, "waiting", 0, ids, justid=True)
            await asyncio.sleep(RECLAIM_S / 6)

    alive = asyncio.create_task(keep_fresh())
    try:
        await asyncio.sleep(0.05)
        again = await take(redis_queue, "live-worker")
    finally:
        alive.cancel()
    assert again.entry_id == dead.entry_id


async def test_a_handed_back_request_is_taken_next_in_its_old_place(queue: RequestQueue) -> None:
    for n in range(3):
        await queue.put("q", job(n))
    first = await take(queue, "stopping")
    second = await take(queue, "stopping")
    assert await queue.hand_back_all("q", consumer="stopping") == 2
    order = []
    for _ in range(3):
        taken = await take(queue, "other", timeout=RECLAIM_S + 2)
        assert await queue.accept(taken)
        order.append(taken.message["n"])
    assert order == [0, 1, 2]
    assert taken.deliveries == 1  # a hand-back is no failed delivery
    assert not await queue.accept(first)
    assert not await queue.accept(second)


async def test_a_withdrawn_request_is_never_served(queue: RequestQueue) -> None:
    waiting = await queue.put("q", job(1))
    await queue.put("q", job(2))
    assert await queue.withdraw("q", waiting)
    taken = await take(queue, "w")
    assert taken.message["n"] == 2
    # withdrawn after a worker took it, before it accepted: the accept fails
    assert await queue.withdraw("q", taken.entry_id)
    assert not await queue.accept(taken)
    # once accepted it is the worker's: withdrawing it changes nothing
    third = await queue.put("q", job(3))
    taken = await take(queue, "w")
    assert await queue.accept(taken)
    assert not await queue.withdraw("q", third)


async def test_queues_are_independent(queue: RequestQueue) -> None:
    await queue.put("background", job(1))
    with pytest.raises(TimeoutError):
        await take(queue, "w", timeout=0.3)
    assert (await queue.take("background", consumer="w")).message["n"] == 1


async def test_a_cancelled_take_loses_nothing(queue: RequestQueue) -> None:
    waiting = asyncio.create_task(queue.take("q", consumer="stopping"))
    await asyncio.sleep(0.1)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    await queue.hand_back_all("q", consumer="stopping")
    await queue.put("q", job(1))
    taken = await take(queue, "w", timeout=RECLAIM_S + 3)
    assert taken.message["n"] == 1


@pytest.mark.redis
async def test_requests_wait_longer_than_a_minute_in_principle(
    redis_queue: RedisStreamQueue, redis_db: aioredis.Redis
) -> None:
    """Nothing in the queue expires (the channel layer dropped requests after 60 s)."""
    await redis_queue.put("q", job(1))
    ttls = [await redis_db.ttl(key) async for key in redis_db.scan_iter("inference:queue:q")]
    assert ttls == [-1]  # no expiry on the stream
    assert (await take(redis_queue, "w")).message["n"] == 1


async def test_a_request_waiting_taken_or_accepted_is_not_lost(queue: RequestQueue) -> None:
    waiting = await queue.put("q", job(1))
    assert await queue.lost("q", waiting) is False
    taken = await take(queue, "w")
    assert await queue.lost("q", taken.entry_id) is False
    assert await queue.accept(taken)
    assert await queue.lost("q", taken.entry_id) is False  # served, not lost


@pytest.mark.redis
async def test_a_request_a_redis_restart_dropped_is_lost(
    redis_queue: RedisStreamQueue, redis_db: aioredis.Redis
) -> None:
    entry = await redis_queue.put("q", job(1))
    await redis_db.flushdb()  # restarted without persistence
    assert await redis_queue.lost("q", entry) is True
    await redis_queue.put("q", job(1))  # its put key went too: it is queued anew
    assert await redis_queue.depth("q") == 1


@pytest.mark.redis
async def test_a_gone_workers_own_queue_expires_and_a_live_ones_does_not(
    redis_queue: RedisStreamQueue, redis_db: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31 defect 12: a worker's own queue (`<queue>@<worker>`, affinity and warm-ups)
    stayed in Redis forever after the worker was gone, one stream and group per worker ever
    started. It now expires a while after its last put or take; the shared queue never does."""
    from inference.wire import stream_queue

    monkeypatch.setattr(stream_queue, "WORKER_QUEUE_IDLE_S", 1.0)
    await redis_queue.put("q", job(1))
    await redis_queue.put("q@gone", job(2))  # routed to a worker that died just then
    live = asyncio.create_task(redis_queue.take_any(["q@live"], consumer="live"))
    await asyncio.sleep(2.0)  # the live worker waits, taking
    assert await redis_db.exists(f"{KEY_PREFIX}q@live") == 1
    assert await redis_db.exists(f"{KEY_PREFIX}q@gone") == 0
    assert await redis_db.ttl(f"{KEY_PREFIX}q") == -1  # the shared queue: kept
    await redis_queue.put("q@live", job(3))
    taken = await asyncio.wait_for(live, 3)
    assert taken.message["n"] == 3
