"""The embedded default's Redis, as tests reach it: the process's own redis-server."""

from __future__ import annotations

import asyncio
import uuid
import weakref

import redis

from inference.wire.embedded_redis import embedded_redis_url
from inference.wire.registry import RedisWorkerRegistry
from inference.wire.request_queue import RequestQueue, request_queue

_queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RequestQueue] = (
    weakref.WeakKeyDictionary()
)


def embedded_queue() -> RequestQueue:
    """The request queue the embedded worker and the web code of this process share (one
    client per event loop: a Redis client belongs to the loop that made it)."""
    loop = asyncio.get_running_loop()
    queue = _queues.get(loop)
    if queue is None:
        queue = _queues[loop] = request_queue(redis_url="")
    return queue


def empty_embedded_redis() -> None:
    """Empty the embedded Redis: each test starts as a fresh process does, with no queued
    requests, leases, logs or workers left by the tests before it."""
    client = redis.Redis.from_url(embedded_redis_url())
    try:
        client.flushall()
    finally:
        client.close()


def fresh_registry() -> RedisWorkerRegistry:
    """A worker registry of its own on the embedded Redis (a key no other test uses): the
    workers a test starts with it are the only ones it sees."""
    return RedisWorkerRegistry(redis_url="", key=f"test:workers:{uuid.uuid4().hex}")
