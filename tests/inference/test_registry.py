"""The worker registry on the embedded Redis and on a Redis server (db 11, flushed around each
test)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from inference.wire.registry import RedisWorkerRegistry, WorkerRegistry, worker_registry
from tests.inference.redis_db import EMBEDDED_AND_SERVER, flushed_redis, server_url

REDIS_URL = "redis://127.0.0.1:6379/11"


@pytest.fixture(params=EMBEDDED_AND_SERVER)
async def registry(request: pytest.FixtureRequest) -> AsyncIterator[WorkerRegistry]:
    url = server_url(request.param, REDIS_URL)
    async with flushed_redis(url):
        made = RedisWorkerRegistry(redis_url=url)
        yield made
        await made.aclose()


async def test_no_worker_means_zero_capacity(registry: WorkerRegistry) -> None:
    assert await registry.live_workers() == {}
    assert await registry.capacity() == 0


async def test_capacity_sums_live_workers_and_announce_upserts(registry: WorkerRegistry) -> None:
    await registry.announce(worker_id="w1", capacity=4, ttl_s=10)
    await registry.announce(worker_id="w2", capacity=6, ttl_s=10)
    assert await registry.live_workers() == {"w1": 4, "w2": 6}
    assert await registry.capacity() == 10

    await registry.announce(worker_id="w1", capacity=2, ttl_s=10)
    assert await registry.live_workers() == {"w1": 2, "w2": 6}


async def test_withdraw_removes_a_worker_and_ignores_unknown_ones(registry: WorkerRegistry) -> None:
    await registry.announce(worker_id="w1", capacity=4, ttl_s=10)
    await registry.announce(worker_id="w2", capacity=6, ttl_s=10)
    await registry.withdraw(worker_id="w1")
    await registry.withdraw(worker_id="w1")
    await registry.withdraw(worker_id="never-seen")
    assert await registry.live_workers() == {"w2": 6}


async def test_a_worker_that_stops_announcing_expires(registry: WorkerRegistry) -> None:
    await registry.announce(worker_id="silent", capacity=4, ttl_s=0.2)
    await registry.announce(worker_id="alive", capacity=6, ttl_s=10)
    assert await registry.capacity() == 10
    await asyncio.sleep(0.3)
    assert await registry.live_workers() == {"alive": 6}
    assert await registry.capacity() == 6


async def test_reannouncing_keeps_a_worker_alive(registry: WorkerRegistry) -> None:
    for _ in range(3):  # 0.6 s in all, longer than one ttl
        await registry.announce(worker_id="w1", capacity=4, ttl_s=0.5)
        await asyncio.sleep(0.2)
    assert await registry.capacity() == 4


@pytest.mark.redis
async def test_redis_prunes_expired_workers_and_keys_expire(redis_db: aioredis.Redis) -> None:
    registry = RedisWorkerRegistry(redis_url=REDIS_URL, key="t:workers")
    try:
        await registry.announce(worker_id="gone", capacity=1, ttl_s=0.1)
        await registry.announce(worker_id="kept", capacity=2, ttl_s=5)
        # the keys outlive their longest-lived worker by a little, no more
        assert 5000 < await redis_db.pttl("t:workers:expiry") <= 6000
        assert 5000 < await redis_db.pttl("t:workers:capacity") <= 6000
        await asyncio.sleep(0.2)
        assert await registry.live_workers() == {"kept": 2}
        assert await redis_db.zrange("t:workers:expiry", 0, -1) == ["kept"]
        assert await redis_db.hgetall("t:workers:capacity") == {"kept": "2"}
    finally:
        await registry.aclose()


@pytest.mark.redis
async def test_two_processes_see_the_same_workers(redis_db: aioredis.Redis) -> None:
    worker_side = RedisWorkerRegistry(redis_url=REDIS_URL)
    web_side = RedisWorkerRegistry(redis_url=REDIS_URL)
    try:
        await worker_side.announce(worker_id="w1", capacity=3, ttl_s=10)
        assert await web_side.capacity() == 3
        await worker_side.withdraw(worker_id="w1")
        assert await web_side.capacity() == 0
    finally:
        await worker_side.aclose()
        await web_side.aclose()


async def _kill_other_connections(admin: aioredis.Redis) -> int:
    """Drop every db-11 connection but the admin's own, as a Redis restart would. Only db 11:
    the server is shared with other test runs and services."""
    me = await admin.client_id()
    killed = 0
    for client in await admin.client_list():
        if int(client["db"]) == 11 and int(client["id"]) != me:
            await admin.client_kill_filter(_id=client["id"])
            killed += 1
    return killed


@pytest.mark.redis
async def test_redis_registry_works_again_after_its_connections_drop(
    redis_db: aioredis.Redis,
) -> None:
    registry = RedisWorkerRegistry(redis_url=REDIS_URL)
    try:
        await registry.announce(worker_id="w1", capacity=4, ttl_s=10)
        assert await _kill_other_connections(redis_db) >= 1
        assert await registry.capacity() == 4
        await registry.announce(worker_id="w2", capacity=1, ttl_s=10)

        # A restarted server has also lost its script cache (NOSCRIPT); SCRIPT FLUSH would hit
        # every user of the shared server, so make this client's script ids unknown instead.
        registry._announce.sha = "0" * 40
        registry._live.sha = "0" * 40
        await _kill_other_connections(redis_db)
        await registry.announce(worker_id="w3", capacity=2, ttl_s=10)
        assert await registry.live_workers() == {"w1": 4, "w2": 1, "w3": 2}
    finally:
        await registry.aclose()


async def test_a_call_while_redis_is_unreachable_raises_connection_error() -> None:
    # nothing listens on port 1: the outage case, which callers handle by retrying later
    registry = RedisWorkerRegistry(redis_url="redis://127.0.0.1:1/11")
    try:
        with pytest.raises(RedisConnectionError):
            await registry.capacity()
    finally:
        await registry.aclose()


async def test_without_a_redis_url_the_embedded_worker_and_the_web_share_one_registry() -> None:
    # the embedded default: the worker and the web code of one process open their own clients
    worker_side, web_side = worker_registry(redis_url=""), worker_registry(redis_url="")
    try:
        await worker_side.announce(worker_id="embedded-test", capacity=3, ttl_s=10)
        assert (await web_side.live_workers()).get("embedded-test") == 3
        await worker_side.withdraw(worker_id="embedded-test")
        assert "embedded-test" not in await web_side.live_workers()
    finally:
        await worker_side.aclose()
        await web_side.aclose()
