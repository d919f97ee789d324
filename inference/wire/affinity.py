"""Routing affinity: a conversation's next turn goes to the worker that served its last one.

Prefix caches are per engine: the worker that answered a conversation's previous turn holds its
history in vLLM's prefix cache, any other worker prefills it all again. So the requester
remembers which worker accepted each conversation's turn (`AffinityMap`, a Redis key per
conversation with a time-to-live, or in process for the embedded default) and `route` puts the
next turn on that worker's own queue (`request_queue.worker_queue`) while the registry shows it
alive with a free slot; else, or for a first turn, on the shared queue, where any worker takes
it. A turn routed to a worker that then does not take it soon is moved to the shared queue by
its requester (`chatapp/answers/relay.py`), so affinity never makes anyone wait long.
"""

from __future__ import annotations

import logging
import threading
import time
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


class LocalAffinityMap:
    def __init__(self, *, ttl_s: float) -> None:
        self._ttl_s = ttl_s
        self._workers: dict[str, tuple[str, float]] = {}  # session -> (worker, expiry)
        self._lock = threading.Lock()

    async def worker_of(self, session_id: str) -> str | None:
        with self._lock:
            remembered = self._workers.get(session_id)
            if remembered is None or remembered[1] <= time.monotonic():
                self._workers.pop(session_id, None)
                return None
            return remembered[0]

    async def remember(self, session_id: str, worker_id: str) -> None:
        with self._lock:
            if len(self._workers) > 100_000:  # bounded: forget the expired ones
                now = time.monotonic()
                self._workers = {s: w for s, w in self._workers.items() if w[1] > now}
            self._workers[session_id] = (worker_id, time.monotonic() + self._ttl_s)

    async def aclose(self) -> None:
        return None


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


_local_maps: dict[float, LocalAffinityMap] = {}


def affinity_map(*, redis_url: str, ttl_s: float) -> AffinityMap:
    """Redis-backed when `redis_url` is set; else one in-process map (per time-to-live)."""
    if redis_url:
        return RedisAffinityMap(redis_url=redis_url, ttl_s=ttl_s)
    return _local_maps.setdefault(ttl_s, LocalAffinityMap(ttl_s=ttl_s))


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
