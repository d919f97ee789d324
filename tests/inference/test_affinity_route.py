"""Routing affinity: a conversation's request goes to the worker that served its last turn
while that worker is alive with a free slot, else to the shared queue; and a routing failure
(Redis away) sends it to the shared queue, never fails the request."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from inference.wire.affinity import AffinityMap, RedisAffinityMap, route
from inference.wire.registry import RedisWorkerRegistry
from inference.wire.request_queue import worker_queue
from tests.inference.redis_db import EMBEDDED_AND_SERVER, flushed_redis, server_url
from tests.support.net import free_port

SHARED = "inference.requests"
REDIS_URL = "redis://127.0.0.1:6379/8"


@pytest.fixture
async def embedded() -> AsyncIterator[str]:
    """This module's db of the embedded Redis, empty."""
    url = server_url("embedded", REDIS_URL)
    async with flushed_redis(url):
        yield url


async def test_a_conversation_goes_to_its_last_worker_while_it_has_a_free_slot(
    embedded: str,
) -> None:
    affinity = RedisAffinityMap(redis_url=embedded, ttl_s=60)
    registry = RedisWorkerRegistry(redis_url=embedded)
    await affinity.remember("c1", "w1")
    await registry.announce(worker_id="w1", capacity=2, ttl_s=60, free=1)
    assert await route(queue=SHARED, session_id="c1", affinity=affinity, registry=registry) == (
        worker_queue(SHARED, "w1")
    )
    await registry.announce(worker_id="w1", capacity=2, ttl_s=60, free=0)  # full now
    assert await route(queue=SHARED, session_id="c1", affinity=affinity, registry=registry) == (
        SHARED
    )
    assert await route(queue=SHARED, session_id=None, affinity=affinity, registry=registry) == (
        SHARED
    )
    assert await route(queue=SHARED, session_id="c1", affinity=None, registry=registry) == SHARED
    await affinity.aclose()
    await registry.aclose()


async def test_affinity_that_cannot_be_read_routes_to_the_shared_queue(embedded: str) -> None:
    unreachable = RedisAffinityMap(redis_url=f"redis://127.0.0.1:{free_port()}/0", ttl_s=60)
    registry = RedisWorkerRegistry(redis_url=embedded)
    await registry.announce(worker_id="w1", capacity=2, ttl_s=60, free=2)
    try:
        queue = await route(queue=SHARED, session_id="c1", affinity=unreachable, registry=registry)
    finally:
        await unreachable.aclose()
        await registry.aclose()
    assert queue == SHARED


@pytest.fixture(params=EMBEDDED_AND_SERVER)
async def affinity_map(
    request: pytest.FixtureRequest,
) -> AsyncIterator[Callable[[float], AffinityMap]]:
    """A map on the Redis under test (embedded, or the server) with this TTL."""
    made: list[AffinityMap] = []
    url = server_url(request.param, REDIS_URL)

    def make(ttl_s: float) -> AffinityMap:
        affinity = RedisAffinityMap(redis_url=url, ttl_s=ttl_s)
        made.append(affinity)
        return affinity

    async with flushed_redis(url):
        yield make
    for affinity in made:
        await affinity.aclose()


async def test_a_conversation_is_remembered_with_its_latest_worker_until_it_expires(
    affinity_map: Callable[[float], AffinityMap],
) -> None:
    affinity = affinity_map(0.3)
    assert await affinity.worker_of("c1") is None
    await affinity.remember("c1", "w1")
    await affinity.remember("c2", "w2")
    await affinity.remember("c1", "w3")  # its next turn went to another worker
    assert (await affinity.worker_of("c1"), await affinity.worker_of("c2")) == ("w3", "w2")
    await asyncio.sleep(0.2)
    await affinity.remember("c2", "w2")  # each turn keeps it another TTL
    await asyncio.sleep(0.2)
    assert (await affinity.worker_of("c1"), await affinity.worker_of("c2")) == (None, "w2")
