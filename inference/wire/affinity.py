"""Routing affinity: a conversation's next turn goes to the worker that served its last one.

Prefix caches are per engine: the worker that answered a conversation's previous turn holds its
history in vLLM's prefix cache, any other worker prefills it all again. So the requester
remembers which worker accepted each conversation's turn (`AffinityMap`, a Redis key per
conversation with a time-to-live) and `route` puts the
next turn on that worker's own queue (`request_queue.worker_queue`) while the registry shows it
alive with a free slot; else, or for a first turn, on the shared queue, where any worker takes
it. A turn routed to a worker that then does not take it soon is moved to the shared queue by
its requester (`chatapp/answers/relay.py`), so affinity never makes anyone wait long.
"""

from __future__ import annotations

import logging
from typing import Protocol

import redis.asyncio as redis

from inference.wire.redis_client import redis_client
from inference.wire.registry import WorkerRegistry
from inference.wire.request_queue import worker_queue

logger = logging.getLogger(__name__)

KEY_PREFIX = "inference:affinity:"


class AffinityMap(Protocol):
    async def worker_of(self, session_id: str) -> str | None:
        """The worker that accepted the session's last turn, if remembered."""

    async def remember(self, session_id: str, worker_id: str) -> None: ...

    async def aclose(self) -> None: ...


class RedisAffinityMap:
    def __init__(self, *, redis_url: str, ttl_s: float) -> None:
        self._redis: redis.Redis = redis_client(redis_url)
        self._ttl_ms = max(1, round(ttl_s * 1000))

    async def worker_of(self, session_id: str) -> str | None:
        worker = await self._redis.get(f"{KEY_PREFIX}{session_id}")
        return None if worker is None else str(worker)

    async def remember(self, session_id: str, worker_id: str) -> None:
        await self._redis.set(f"{KEY_PREFIX}{session_id}", worker_id, px=self._ttl_ms)

    async def aclose(self) -> None:
        await self._redis.aclose()


def affinity_map(*, redis_url: str, ttl_s: float) -> AffinityMap:
    """The Redis map (`redis_url` empty: this process's embedded Redis)."""
    return RedisAffinityMap(redis_url=redis_url, ttl_s=ttl_s)


async def route(
    *,
    queue: str,
    session_id: str | None,
    affinity: AffinityMap | None,
    registry: WorkerRegistry,
) -> str:
    """The queue to put a request of `session_id` on: its last worker's own queue while that
    worker is alive with a free slot, else `queue` (shared). Affinity is an optimisation,
    never a reason to fail: without it, or when it fails (logged), `queue`."""
    if session_id is None or affinity is None:
        return queue
    try:
        worker = await affinity.worker_of(session_id)
        if worker is None:
            return queue
        free = await registry.free_slots()
    except Exception as exc:
        logger.warning("routing session %s by affinity failed: %s", session_id, exc)
        return queue
    if free.get(worker, 0) <= 0:
        return queue  # gone, or full: any worker beats waiting for this one
    return worker_queue(queue, worker)
