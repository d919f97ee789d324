"""The request queue on Redis Streams: one stream per queue, one consumer group of workers.

- `put` is XADD, made idempotent by the request's key (a retried put after a lost reply adds
  nothing: a duplicate entry could start the same request on two workers).
- `take` is XREADGROUP (new entries) after XAUTOCLAIM (entries another taker held longer than
  `reclaim_after_s` without accepting them: it died between taking and serving). The entry then
  sits in the taker's pending list.
- `accept` acknowledges and deletes the entry, but only while the taker still owns it (one
  script, atomic): if it was reclaimed by another worker or withdrawn, the accept fails and the
  taker drops it, so a request is served by one worker however slow the first taker was.
- `hand_back` marks a pending entry as idle for a day, so the next XAUTOCLAIM of any worker
  takes it at once, in its original place (entries are claimed oldest first).
- Nothing expires: a request waits as long as its requester does, and the requester
  `withdraw`s it when it gives up. The length of a stream is bounded by admission (requests
  waiting for workers), not here. Only a worker's own queue (`<queue>@<worker>`) goes away,
  `WORKER_QUEUE_IDLE_S` after its last put or its worker's last take: what waits there when
  its worker is gone was moved on by its requester long before.

A Redis restart loses what Redis did not persist (configure AOF to keep queued requests): a
requester asks `lost` about its waiting requests and puts them again; the group is created
again on the first read that finds it gone (NOGROUP).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Sequence
from typing import Any

import redis.asyncio as redis
from redis.exceptions import ResponseError

from inference.wire import retry
from inference.wire.redis_client import redis_client
from inference.wire.request_queue import Taken, is_worker_queue

logger = logging.getLogger(__name__)

GROUP = "inference.workers"
_RECLAIM_SCANS = 50  # XAUTOCLAIM calls per look: ~500 pending entries, far above the slots
KEY_PREFIX = "inference:queue:"
# XREADGROUP waits this long on the server, then the taker looks for entries to reclaim
BLOCK_MS = 1000
# a handed-back entry is this idle: older than any worker's reclaim age
_HANDED_BACK_IDLE_MS = 24 * 3600 * 1000
# how long a put's key remembers its entry (a retried put within this adds nothing)
_PUT_KEY_TTL_S = 3600
# a worker's own queue is deleted this long after its last put or take (its worker is gone)
WORKER_QUEUE_IDLE_S = 600.0
# how long an accept remembers its taker (a retried accept within this still succeeds)
_ACCEPTED_MARKER_TTL_S = 60

# KEYS: stream, put key. ARGV: payload, key ttl s, stream idle ttl ms (0: none). Returns
# the entry id (new or earlier).
_PUT = """
local earlier = redis.call('GET', KEYS[2])
if earlier then return earlier end
local id = redis.call('XADD', KEYS[1], '*', 'm', ARGV[1])
redis.call('SET', KEYS[2], id, 'EX', tonumber(ARGV[2]))
if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3])) end
return id
"""

# KEYS: stream, accepted marker. ARGV: group, consumer, entry id, marker ttl s.
# 1: accepted (now, or by this consumer's earlier try whose reply was lost); 0: not this
# consumer's any more.
_ACCEPT = """
if redis.call('GET', KEYS[2]) == ARGV[2] then return 1 end
local mine = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1, ARGV[2])
if #mine == 0 then return 0 end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
redis.call('XDEL', KEYS[1], ARGV[3])
redis.call('SET', KEYS[2], ARGV[2], 'EX', tonumber(ARGV[4]))
return 1
"""

# KEYS: stream. ARGV: group, consumer, entry id, idle ms. 1 if it was this consumer's.
# The delivery count goes back one: a hand-back is no failed delivery (see MAX_DELIVERIES).
_HAND_BACK = """
local mine = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1, ARGV[2])
if #mine == 0 then return 0 end
local count = math.max(tonumber(mine[1][4]) - 1, 0)
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3],
  'IDLE', tonumber(ARGV[4]), 'RETRYCOUNT', count, 'JUSTID')
return 1
"""

# KEYS: stream. ARGV: group, entry id. 1 if the entry was still there (nobody accepted it).
_WITHDRAW = """
local present = redis.call('XDEL', KEYS[1], ARGV[2])
pcall(redis.call, 'XACK', KEYS[1], ARGV[1], ARGV[2])
return present
"""


class RedisStreamQueue:
    def __init__(self, *, redis_url: str, reclaim_after_s: float = 10.0) -> None:
        self._redis: redis.Redis = redis_client(redis_url)
        # Its reads wait BLOCK_MS on the server, so no client read timeout (the server always
        # answers within BLOCK_MS); TCP keepalive notices a peer that vanished (~45 s), as for
        # the channel layer (inference/wire/transport.py).
        self._blocking: redis.Redis = redis_client(redis_url, socket_timeout_s=None)
        self._reclaim_after_ms = max(1, round(reclaim_after_s * 1000))
        self._put = self._redis.register_script(_PUT)
        self._accept = self._redis.register_script(_ACCEPT)
        self._hand_back = self._redis.register_script(_HAND_BACK)
        self._withdraw = self._redis.register_script(_WITHDRAW)
        self._groups: set[str] = set()
        self._kept: dict[str, float] = {}  # worker queue -> when its idle expiry was renewed

    async def put(self, queue: str, message: dict[str, Any]) -> str:
        key = str(message.get("request_id") or "")
        idle_ms = _idle_ms(queue)
        if not key:  # nothing to make it idempotent by: a plain XADD
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.xadd(_stream(queue), {"m": json.dumps(message)})
                if idle_ms:
                    pipe.pexpire(_stream(queue), idle_ms)
                return str((await pipe.execute())[0])
        entry_id = await self._put(
            keys=[_stream(queue), f"{KEY_PREFIX}{queue}:put:{key}"],
            args=[json.dumps(message), _PUT_KEY_TTL_S, idle_ms],
        )
        return str(entry_id)

    async def take(self, queue: str, *, consumer: str) -> Taken:
        return await self.take_any([queue], consumer=consumer)

    async def take_any(self, queues: Sequence[str], *, consumer: str) -> Taken:
        streams = {_stream(queue): queue for queue in queues}
        while True:
            retry.stop_if_cancelled()
            try:
                for queue in queues:
                    await self._group_ready(queue)
                await self._keep(queues)
                for queue in queues:
                    reclaimed = await self._reclaim(queue, consumer=consumer)
                    if reclaimed is not None:
                        return reclaimed
                reply: Any = await self._blocking.xreadgroup(
                    GROUP, consumer, dict.fromkeys(streams, ">"), count=1, block=BLOCK_MS
                )
            except ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                self._groups.difference_update(queues)  # Redis restarted or a key expired
                for queue in queues:
                    self._kept.pop(queue, None)
                continue
            read: dict[str, Taken] = {}
            for stream_name, entries in reply or []:
                queue = streams[str(stream_name)]
                for entry_id, fields in entries:
                    taken = _taken(queue, entry_id, fields, consumer=consumer, deliveries=1)
                    if taken is None:
                        await self._drop(queue, str(entry_id))
                    else:
                        read[queue] = taken
            chosen = next((read[queue] for queue in queues if queue in read), None)
            for extra in read.values():  # one read can bring one entry of each queue
                if extra is not chosen:
                    await self.hand_back(extra)
            if chosen is not None:
                return chosen

    async def accept(self, taken: Taken) -> bool:
        # safe to retry: a second try after a lost reply finds its own marker
        accepted = await self._accept(
            keys=[_stream(taken.queue), f"{KEY_PREFIX}{taken.queue}:accepted:{taken.entry_id}"],
            args=[GROUP, taken.consumer, taken.entry_id, _ACCEPTED_MARKER_TTL_S],
        )
        return bool(accepted)

    async def hand_back(self, taken: Taken) -> None:
        await self._hand_back(
            keys=[_stream(taken.queue)],
            args=[GROUP, taken.consumer, taken.entry_id, _HANDED_BACK_IDLE_MS],
        )

    async def hand_back_all(self, queue: str, *, consumer: str) -> int:
        try:
            pending = await self._redis.xpending_range(
                _stream(queue), GROUP, min="-", max="+", count=1000, consumername=consumer
            )
        except ResponseError:  # no group: nothing was taken
            return 0
        for entry in pending:
            await self._hand_back(
                keys=[_stream(queue)],
                args=[GROUP, consumer, str(entry["message_id"]), _HANDED_BACK_IDLE_MS],
            )
        return len(pending)

    async def withdraw(self, queue: str, entry_id: str) -> bool:
        return bool(await self._withdraw(keys=[_stream(queue)], args=[GROUP, entry_id]))

    async def depth(self, queue: str) -> int:
        return int(await self._redis.xlen(_stream(queue)))

    async def lost(self, queue: str, entry_id: str) -> bool:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.xrange(_stream(queue), min=entry_id, max=entry_id, count=1)
            pipe.exists(f"{KEY_PREFIX}{queue}:accepted:{entry_id}")
            entries, accepted = await pipe.execute()
        return not entries and not accepted

    async def aclose(self) -> None:
        await self._redis.aclose()
        await self._blocking.aclose()

    # ---- helpers -------------------------------------------------------------------------

    async def _group_ready(self, queue: str) -> None:
        if queue in self._groups:
            return
        try:
            # from the stream's start: requests put before the first worker came are served
            await self._redis.xgroup_create(_stream(queue), GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._groups.add(queue)

    async def _keep(self, queues: Sequence[str]) -> None:
        """Renew the idle expiry of the worker queues taken from (a quarter of it at most):
        the queue of a live worker, which takes from it all the time, never expires."""
        now = time.monotonic()
        for queue in queues:
            idle_ms = _idle_ms(queue)
            if idle_ms and now - self._kept.get(queue, -math.inf) >= WORKER_QUEUE_IDLE_S / 4:
                await self._redis.pexpire(_stream(queue), idle_ms)
                self._kept[queue] = now

    async def _reclaim(self, queue: str, *, consumer: str) -> Taken | None:
        """The oldest entry a taker held longer than the reclaim age, now this consumer's.

        Looked for before every read (one round trip, well under a millisecond), so a
        handed-back or reclaimable entry goes ahead of newer ones."""
        cursor = "0-0"
        # Redis looks at ~10 pending entries per call: follow its cursor, or an idle entry
        # behind more than ten fresh ones (takers waiting for a slot) is never reached
        for _ in range(_RECLAIM_SCANS):
            reply = await self._redis.xautoclaim(
                _stream(queue), GROUP, consumer, self._reclaim_after_ms, start_id=cursor, count=1
            )
            for entry_id, fields in reply[1] if len(reply) > 1 else []:
                if fields is None:  # deleted meanwhile (withdrawn)
                    continue
                deliveries = await self._deliveries(queue, str(entry_id))
                taken = _taken(queue, entry_id, fields, consumer=consumer, deliveries=deliveries)
                if taken is not None:
                    logger.info(
                        "reclaimed queued request %s (taken %d times before)",
                        entry_id,
                        deliveries - 1,
                    )
                    return taken
                await self._drop(queue, str(entry_id))
            cursor = str(reply[0])
            if cursor in ("0-0", "0"):  # the whole pending list was scanned
                return None
        return None

    async def _deliveries(self, queue: str, entry_id: str) -> int:
        pending = await self._redis.xpending_range(
            _stream(queue), GROUP, min=entry_id, max=entry_id, count=1
        )
        return int(pending[0]["times_delivered"]) if pending else 1

    async def _drop(self, queue: str, entry_id: str) -> None:
        logger.warning("dropping unreadable queue entry %s of %s", entry_id, queue)
        await self._withdraw(keys=[_stream(queue)], args=[GROUP, entry_id])


def _idle_ms(queue: str) -> int:
    return int(WORKER_QUEUE_IDLE_S * 1000) if is_worker_queue(queue) else 0


def _stream(queue: str) -> str:
    return f"{KEY_PREFIX}{queue}"


def _taken(
    queue: str, entry_id: Any, fields: dict[str, Any], *, consumer: str, deliveries: int
) -> Taken | None:
    try:
        message = json.loads(fields["m"])
    except (KeyError, TypeError, ValueError):
        return None
    if not isinstance(message, dict):
        return None
    return Taken(
        queue=queue,
        entry_id=str(entry_id),
        message=message,
        consumer=consumer,
        deliveries=deliveries,
    )
