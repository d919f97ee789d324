"""One way to open an asyncio Redis client for short idempotent commands (registry, admission).

Two quick retries, each on a fresh connection: a pooled connection that died with a Redis
restart fails its next command, and without a retry that would reach the caller; callers only
send commands that are safe to run twice. During an outage the ConnectionError still reaches
the caller. The pool blocks: a burst of callers waits for a free connection instead of failing
with "Too many connections" (the plain pool's limit is 100).
"""

from __future__ import annotations

import redis.asyncio as redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff


def retrying_redis(redis_url: str) -> redis.Redis:
    return redis.Redis.from_pool(
        redis.BlockingConnectionPool.from_url(
            redis_url,
            max_connections=50,
            timeout=5,
            decode_responses=True,
            retry=Retry(ExponentialWithJitterBackoff(cap=0.2, base=0.02), 2),
        )
    )
