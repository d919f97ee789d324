"""A real Redis database for the wire tests, flushed around each test (`redis-server` on
127.0.0.1:6379; each test module names its own db in REDIS_URL, the `redis_db` fixture of
tests/inference/conftest.py connects to it)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

# A fixture's params: the in-process implementation, and the Redis one (marked `redis`).
LOCAL_AND_REDIS = ["local", pytest.param("redis", marks=pytest.mark.redis)]


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
