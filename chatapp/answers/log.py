"""Every answer's entries, in `seq` order, kept for a while so a socket can resume it.

Redis (any web process can read what another one logged): a stream per answer whose entry ids
are `<seq>-1`, so Redis itself refuses an out-of-order or repeated seq, plus a small hash with
the owning relay's channel and its last heartbeat. Without Redis (the embedded default, one
process) the same thing lives in memory.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Protocol

import redis.asyncio as aioredis

from chatapp.answers.entries import LogEntry, log_entry_adapter


@dataclass(frozen=True, slots=True)
class Ownership:
    relay_channel: str
    heartbeat_at: float  # unix time


class AnswerLog(Protocol):
    async def begin(self, *, message_id: uuid.UUID, relay_channel: str) -> None:
        """Start a fresh log (a regenerate reuses the message id) owned by this relay."""

    async def append(self, *, message_id: uuid.UUID, entry: LogEntry) -> None: ...

    async def heartbeat(
        self, *, relay_channel: str, lengths: dict[uuid.UUID, int]
    ) -> list[uuid.UUID]:
        """The owning relay is alive and still tracks these answers: (re)write the ownership.

        `lengths` is how many entries each log must hold; returns the answers whose log does
        not (Redis restarted under it), which the relay then writes again.
        """

    async def ownership(self, *, message_id: uuid.UUID) -> Ownership | None: ...

    async def entries_after(self, *, message_id: uuid.UUID, seq: int) -> list[LogEntry] | None:
        """Entries with a larger seq, in order; None when there is no log (never or expired)."""


class RedisAnswerLog:
    def __init__(self, *, redis_url: str, ttl_s: float, prefix: str = "chat:answer") -> None:
        self._redis = aioredis.Redis.from_url(redis_url)
        self._ttl_ms = int(ttl_s * 1000)
        self._prefix = prefix

    def _keys(self, message_id: uuid.UUID) -> tuple[str, str]:
        return f"{self._prefix}:{message_id}:log", f"{self._prefix}:{message_id}:owner"

    async def begin(self, *, message_id: uuid.UUID, relay_channel: str) -> None:
        log, owner = self._keys(message_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(log)
            pipe.hset(owner, mapping={"relay": relay_channel, "heartbeat": time.time()})
            pipe.pexpire(owner, self._ttl_ms)
            await pipe.execute()

    async def append(self, *, message_id: uuid.UUID, entry: LogEntry) -> None:
        log, _ = self._keys(message_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.xadd(log, {"e": entry.model_dump_json()}, id=f"{entry.seq}-1")
            pipe.pexpire(log, self._ttl_ms)
            await pipe.execute()

    async def heartbeat(
        self, *, relay_channel: str, lengths: dict[uuid.UUID, int]
    ) -> list[uuid.UUID]:
        if not lengths:
            return []
        now = time.time()
        async with self._redis.pipeline(transaction=False) as pipe:
            for message_id in lengths:
                log, owner = self._keys(message_id)
                pipe.hset(owner, mapping={"relay": relay_channel, "heartbeat": now})
                pipe.pexpire(owner, self._ttl_ms)
                pipe.xlen(log)
            results = await pipe.execute()
        return [
            message_id
            for (message_id, expected), length in zip(lengths.items(), results[2::3], strict=True)
            if length != expected
        ]

    async def ownership(self, *, message_id: uuid.UUID) -> Ownership | None:
        _, owner = self._keys(message_id)
        raw = {_text(k): _text(v) for k, v in (await self._redis.hgetall(owner)).items()}
        if "relay" not in raw:
            return None
        return Ownership(relay_channel=raw["relay"], heartbeat_at=float(raw.get("heartbeat", 0)))

    async def entries_after(self, *, message_id: uuid.UUID, seq: int) -> list[LogEntry] | None:
        log, _ = self._keys(message_id)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.exists(log)
            pipe.xrange(log, min=f"{seq + 1}-0", max="+")
            exists, rows = await pipe.execute()
        if not exists:
            return None
        return [log_entry_adapter.validate_json(fields[b"e"]) for _id, fields in rows]

    async def aclose(self) -> None:
        await self._redis.aclose()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass
class _Local:
    relay_channel: str
    heartbeat_at: float
    expires_at: float
    entries: list[LogEntry] = field(default_factory=list)


class LocalAnswerLog:
    def __init__(self, *, ttl_s: float) -> None:
        self._ttl_s = ttl_s
        self._logs: dict[uuid.UUID, _Local] = {}

    def _live(self, message_id: uuid.UUID) -> _Local | None:
        now = time.time()
        for key in [k for k, v in self._logs.items() if v.expires_at <= now]:
            del self._logs[key]
        return self._logs.get(message_id)

    async def begin(self, *, message_id: uuid.UUID, relay_channel: str) -> None:
        now = time.time()
        self._logs[message_id] = _Local(
            relay_channel=relay_channel, heartbeat_at=now, expires_at=now + self._ttl_s
        )

    async def append(self, *, message_id: uuid.UUID, entry: LogEntry) -> None:
        log = self._live(message_id)
        if log is None:
            raise KeyError(f"no log for {message_id}")
        expected = log.entries[-1].seq + 1 if log.entries else 1
        if entry.seq != expected:  # the same rule Redis applies to stream ids
            raise ValueError(f"seq {entry.seq} appended where {expected} was due")
        log.entries.append(entry)
        log.expires_at = time.time() + self._ttl_s

    async def heartbeat(
        self, *, relay_channel: str, lengths: dict[uuid.UUID, int]
    ) -> list[uuid.UUID]:
        now = time.time()
        broken = []
        for message_id, expected in lengths.items():
            log = self._live(message_id)
            if log is None or len(log.entries) != expected:
                broken.append(message_id)
                continue
            log.heartbeat_at = now
            log.expires_at = now + self._ttl_s
        return broken

    async def ownership(self, *, message_id: uuid.UUID) -> Ownership | None:
        log = self._live(message_id)
        return None if log is None else Ownership(log.relay_channel, log.heartbeat_at)

    async def entries_after(self, *, message_id: uuid.UUID, seq: int) -> list[LogEntry] | None:
        log = self._live(message_id)
        return None if log is None else [e for e in log.entries if e.seq > seq]
