"""Every run's entries, in `seq` order, kept for a while so a socket can resume it.

Keyed by the run, never by the message: a regenerate or edit starts a new run in the same
message row, and nothing a relay of an earlier run still does (a late heartbeat, a rewrite)
can touch the new run's log or ownership.

Redis (any web process can read what another one logged): a stream per run whose entry ids
are `<seq>-1`, so Redis itself refuses an older or repeated seq, plus a small hash with
the owning relay's channel, the admission holder and the worker serving the run (whoever ends a
dead owner's run releases and cancels with them). Every heartbeat sets the hash's expiry to the
full TTL again, so how long the owner has been silent is read from the TTL left: Redis's own
clock, never a web host's (hosts whose clocks differ by seconds would reap each other's live
runs). The embedded default keeps them on its process's own Redis.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import redis.asyncio as aioredis

from chatapp.answers.entries import LogEntry, log_entry_adapter
from inference.wire.redis_client import redis_client

# KEYS: owner hash. ARGV: worker channel, request id, ttl ms. PEXPIRE NX is Redis 7; the
# embedded server is 6.2.
_WORKER_TAKEN = """
redis.call('HSET', KEYS[1], 'worker', ARGV[1], 'request', ARGV[2])
if redis.call('PTTL', KEYS[1]) == -1 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
"""


@dataclass(frozen=True, slots=True)
class Ownership:
    relay_channel: str
    silent_s: float  # since the owner's last heartbeat, on the log's clock, when read
    user_key: str = ""  # who holds the run's admission lease
    worker_channel: str = ""  # the worker serving it, once one accepted it
    worker_request_id: str = ""  # the request that worker runs (`<run>~<n>` once moved)


class AnswerLog:
    """The runs' logs and ownership records in Redis (`redis_url` empty: this process's
    embedded Redis)."""

    def __init__(self, *, redis_url: str, ttl_s: float, prefix: str = "chat:run") -> None:
        self._redis: aioredis.Redis = redis_client(redis_url, decode_responses=False)
        self._ttl_ms = int(ttl_s * 1000)
        self._prefix = prefix
        self._worker_taken = self._redis.register_script(_WORKER_TAKEN)

    def _keys(self, run_id: uuid.UUID) -> tuple[str, str]:
        return f"{self._prefix}:{run_id}:log", f"{self._prefix}:{run_id}:owner"

    async def begin(self, *, run_id: uuid.UUID, relay_channel: str, user_key: str) -> None:
        """Start the run's log, owned by this relay."""
        _, owner = self._keys(run_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(
                owner,
                mapping={"relay": relay_channel, "user": user_key},
            )
            pipe.pexpire(owner, self._ttl_ms)
            await pipe.execute()

    async def append(self, *, run_id: uuid.UUID, entry: LogEntry) -> None:
        log, _ = self._keys(run_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.xadd(log, {"e": entry.model_dump_json()}, id=f"{entry.seq}-1")
            pipe.pexpire(log, self._ttl_ms)
            await pipe.execute()

    async def worker_taken(
        self, *, run_id: uuid.UUID, worker_channel: str, request_id: str
    ) -> None:
        """Record which worker serves the run, as which request (so another process can
        cancel it)."""
        _, owner = self._keys(run_id)
        # a record already gone (expired, or Redis lost it) must not come back as a key that
        # never expires; a live one keeps the expiry its heartbeats set
        await self._worker_taken(keys=[owner], args=[worker_channel, request_id, self._ttl_ms])

    async def heartbeat(
        self, *, relay_channel: str, lengths: dict[uuid.UUID, int]
    ) -> list[uuid.UUID]:
        """The owning relay is alive and still runs these: (re)write their ownership.

        `lengths` is how many entries each log must hold; returns the runs whose log does
        not (Redis restarted under it), which the relay then writes again.
        """
        if not lengths:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for run_id in lengths:
                log, owner = self._keys(run_id)
                pipe.hexists(owner, "user")
                pipe.hset(owner, "relay", relay_channel)
                pipe.pexpire(owner, self._ttl_ms)
                pipe.xlen(log)
            results = await pipe.execute()
        # A record without its lease holder is one Redis lost (restarted) and this heartbeat
        # just began again: the relay rewrites it whole, like a short log.
        return [
            run_id
            for (run_id, expected), whole, length in zip(
                lengths.items(), results[0::4], results[3::4], strict=True
            )
            if not whole or length != expected
        ]

    async def rewrite(
        self, *, run_id: uuid.UUID, relay_channel: str, user_key: str, entries: list[LogEntry]
    ) -> None:
        """Replace the run's log with `entries` (after Redis lost it)."""
        log, owner = self._keys(run_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(log)
            for entry in entries:
                pipe.xadd(log, {"e": entry.model_dump_json()}, id=f"{entry.seq}-1")
            pipe.pexpire(log, self._ttl_ms)
            pipe.hset(owner, mapping={"relay": relay_channel, "user": user_key})
            pipe.pexpire(owner, self._ttl_ms)
            await pipe.execute()

    async def ownership(self, *, run_id: uuid.UUID) -> Ownership | None:
        _, owner = self._keys(run_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hgetall(owner)
            pipe.pttl(owner)
            fields, ttl_left_ms = await pipe.execute()
        raw = {_text(k): _text(v) for k, v in fields.items()}
        if "relay" not in raw:
            return None
        return Ownership(
            relay_channel=raw["relay"],
            # no expiry (-1) means no heartbeat ever set one: as good as silent forever
            silent_s=(self._ttl_ms - ttl_left_ms) / 1000 if ttl_left_ms >= 0 else float("inf"),
            user_key=raw.get("user", ""),
            worker_channel=raw.get("worker", ""),
            worker_request_id=raw.get("request", ""),
        )

    async def entries_after(self, *, run_id: uuid.UUID, seq: int) -> list[LogEntry] | None:
        """Entries with a larger seq, in order; None when there is no log (never or expired)."""
        log, owner = self._keys(run_id)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.exists(log, owner)  # a begun run's stream exists from its first entry on
            pipe.xrange(log, min=f"{seq + 1}-0", max="+")
            exists, rows = await pipe.execute()
        if not exists:
            return None
        return [log_entry_adapter.validate_json(fields[b"e"]) for _id, fields in rows]

    async def aclose(self) -> None:
        await self._redis.aclose()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
