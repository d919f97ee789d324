"""Which agents are online: a console socket open now (any web process). Each console socket
holds a lease in one Redis sorted set, renewed while it is open, so a web process that dies
leaves nothing behind for longer than `LEASE_S`."""

from __future__ import annotations

import time

import redis.asyncio as redis

from inference.wire.redis_client import redis_client

LEASE_S = 60.0
RENEW_EVERY_S = 20.0
_KEY = "chat:handoff:consoles"


class Presence:
    def __init__(self, redis_url: str) -> None:
        self._redis: redis.Redis = redis_client(redis_url)

    async def here(self, channel_name: str) -> None:
        """The console socket is open (again): its lease runs LEASE_S from now."""
        await self._redis.zadd(_KEY, {channel_name: time.time() + LEASE_S})

    async def gone(self, channel_name: str) -> None:
        await self._redis.zrem(_KEY, channel_name)

    async def consoles_open(self) -> int:
        """Console sockets open now, over every web process."""
        now = time.time()
        await self._redis.zremrangebyscore(_KEY, "-inf", now)
        return int(await self._redis.zcount(_KEY, now, "+inf"))

    async def aclose(self) -> None:
        await self._redis.aclose()
