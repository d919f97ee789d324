"""Routing affinity: a conversation's request goes to the worker that served its last turn
while that worker is alive with a free slot, else to the shared queue; and a routing failure
(Redis away) sends it to the shared queue, never fails the request."""

from __future__ import annotations

from inference.wire.affinity import LocalAffinityMap, RedisAffinityMap, route
from inference.wire.registry import LocalWorkerRegistry
from inference.wire.request_queue import worker_queue
from tests.support.net import free_port

SHARED = "inference.requests"


async def test_a_conversation_goes_to_its_last_worker_while_it_has_a_free_slot() -> None:
    affinity, registry = LocalAffinityMap(ttl_s=60), LocalWorkerRegistry()
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


async def test_affinity_that_cannot_be_read_routes_to_the_shared_queue() -> None:
    unreachable = RedisAffinityMap(redis_url=f"redis://127.0.0.1:{free_port()}/0", ttl_s=60)
    registry = LocalWorkerRegistry()
    await registry.announce(worker_id="w1", capacity=2, ttl_s=60, free=2)
    try:
        queue = await route(queue=SHARED, session_id="c1", affinity=unreachable, registry=registry)
    finally:
        await unreachable.aclose()
    assert queue == SHARED
