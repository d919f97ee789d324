"""A real Redis database for the wire tests, flushed around each test: each test module names
its own db in REDIS_URL (the `redis-server` on 127.0.0.1:6379, the deployments' Redis 7), and
a contract suite runs once more on the same db of the embedded default's Redis (6.2, this
process's own: `inference/wire/embedded_redis.py`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from inference.wire.embedded_redis import embedded_redis_url

# A fixture's params: the embedded Redis, and the Redis server (marked `redis`).
EMBEDDED_AND_SERVER = ["embedded", pytest.param("server", marks=pytest.mark.redis)]


def server_url(server: str, url: str) -> str:
    """`url` (a db of the Redis server) for "server"; the same db of the embedded Redis for
    "embedded"."""
    if server == "server":
        return url
    return f"{embedded_redis_url()}?db={url.rsplit('/', 1)[1]}"


@contextlib.asynccontextmanager
async def flushed_redis(url: str) -> AsyncIterator[aioredis.Redis]:
    """A client of the database at `url`, emptied before and after."""
    client = aioredis.Redis.from_url(url, decode_responses=True)
    await client.flushdb()
    try:
        yield client
    finally:
        await client.flushdb()
        await client.aclose()
