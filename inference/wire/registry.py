"""Which inference workers are alive and how many requests each can hold.

Workers announce their capacity (running slots + queue) with a time-to-live and re-announce
before it runs out; a worker that dies simply stops announcing and drops out. The web tier sums
the live capacities to tell "no worker" (0) from "busy" and to bound the requests it admits.
"""

from __future__ import annotations

from typing import Any, Protocol

import redis.asyncio as redis

from inference.wire.redis_client import redis_client


class WorkerRegistry(Protocol):
    async def announce(
        self, *, worker_id: str, capacity: int, ttl_s: float, free: int | None = None
    ) -> None:
        """Insert or refresh a worker; it counts as live until now + ttl_s. `free`: its slots
        free right now (for routing affinity; as old as the last announcement)."""

    async def withdraw(self, *, worker_id: str) -> None:
        """Remove a worker at once (clean shutdown); unknown ids are ignored."""

    async def live_workers(self) -> dict[str, int]:
        """worker_id -> capacity of the live workers; expired entries are pruned."""

    async def capacity(self) -> int:
        """Sum of the live workers' capacities: 0 means no worker at all."""

    async def free_slots(self) -> dict[str, int]:
        """worker_id -> free slots, of the live workers that said so."""

    async def aclose(self) -> None:
        """Release connections."""


# Scripts read the clock with Redis TIME so that workers and web processes on different
# machines agree on expiry whatever their own clocks say.
_NOW_MS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# KEYS: expiry zset, capacity hash, free-slots hash. ARGV: worker_id, capacity, ttl_ms, free
# ('' = not said).
_ANNOUNCE = (
    _NOW_MS
    + """
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[3], ARGV[1], ARGV[4]) end
-- keep the keys as long as their longest-lived worker, so a silent fleet leaves nothing behind
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local keep = math.max(tonumber(last[2]) - now, 1) + 1000
redis.call('PEXPIRE', KEYS[1], keep)
redis.call('PEXPIRE', KEYS[2], keep)
redis.call('PEXPIRE', KEYS[3], keep)
"""
)

# KEYS: expiry zset, capacity hash, free-slots hash; ARGV[1]: the hash to read (2 or 3).
# Returns a flat list: id, value, id, value, ... of the live workers (missing values: -1).
_LIVE = (
    _NOW_MS
    + """
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
if #expired > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('HDEL', KEYS[2], unpack(expired))
  redis.call('HDEL', KEYS[3], unpack(expired))
end
local live = redis.call('ZRANGE', KEYS[1], 0, -1)
local out = {}
for _, id in ipairs(live) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', KEYS[tonumber(ARGV[1])], id) or '-1'
end
return out
"""
)


class RedisWorkerRegistry:
    """Registry shared by every process over Redis: a ZSET of expiry times and a HASH of
    capacities, both under `key`. After a Redis outage (or restart) the next call works again:
    it reconnects and the scripts reload themselves (NOSCRIPT); a call during the outage raises
    redis.exceptions.ConnectionError for the caller to retry later. Entries lost in a restart
    come back with the workers' next announcements.
    """

    def __init__(self, *, redis_url: str, key: str = "inference:workers") -> None:
        # Every command here is idempotent, so a retried one is harmless.
        self._redis: redis.Redis = redis_client(redis_url)
        self._expiry_key = f"{key}:expiry"
        self._capacity_key = f"{key}:capacity"
        self._free_key = f"{key}:free"
        self._announce = self._redis.register_script(_ANNOUNCE)
        self._live = self._redis.register_script(_LIVE)

    async def announce(
        self, *, worker_id: str, capacity: int, ttl_s: float, free: int | None = None
    ) -> None:
        ttl_ms = max(1, round(ttl_s * 1000))
        await self._announce(
            keys=self._keys, args=[worker_id, capacity, ttl_ms, "" if free is None else free]
        )

    async def withdraw(self, *, worker_id: str) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.zrem(self._expiry_key, worker_id)
            pipe.hdel(self._capacity_key, worker_id)
            pipe.hdel(self._free_key, worker_id)
            await pipe.execute()

    async def live_workers(self) -> dict[str, int]:
        flat: list[Any] = await self._live(keys=self._keys, args=[2])
        return {str(flat[i]): max(0, int(flat[i + 1])) for i in range(0, len(flat), 2)}

    async def free_slots(self) -> dict[str, int]:
        flat: list[Any] = await self._live(keys=self._keys, args=[3])
        pairs = ((str(flat[i]), int(flat[i + 1])) for i in range(0, len(flat), 2))
        return {worker_id: free for worker_id, free in pairs if free >= 0}

    @property
    def _keys(self) -> list[str]:
        return [self._expiry_key, self._capacity_key, self._free_key]

    async def capacity(self) -> int:
        return sum((await self.live_workers()).values())

    async def aclose(self) -> None:
        await self._redis.aclose()


def worker_registry(*, redis_url: str) -> WorkerRegistry:
    """The Redis registry (`redis_url` empty: this process's embedded Redis, which the embedded
    worker and the web code of the process share)."""
    return RedisWorkerRegistry(redis_url=redis_url)
