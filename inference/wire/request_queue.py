"""The work queue between requesters (web processes, warm-ups) and inference workers.

At-least-once, unlike the channel layer it replaced (which expired queued requests after 60 s
and could hand one request to two readers; see docs/architecture.md). A worker `take`s a
request, then `accept`s it the moment it starts serving it; only the worker whose accept
succeeds serves it, so a request starts on exactly one worker. A request taken and never
accepted (the worker died, or was stopped while taking) goes back to the queue: handed back at
once by a worker that shuts down, reclaimed by another worker after `reclaim_after_s` when the
taker was killed. A requester that gives up `withdraw`s its request, so no worker starts it
later.

Queues are named (`inference.requests` for chat, `inference.background` for warm-ups and
batch work); a worker reads each with its own slots, which is how chat stays ahead.

One implementation: `RedisStreamQueue` (`inference/wire/stream_queue.py`, Redis Streams consumer
groups), on the deployment's Redis or, in the embedded default, on the web process's own
(`inference/wire/embedded_redis.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Taken:
    """A request a worker took and has not accepted yet."""

    queue: str
    entry_id: str
    message: dict[str, Any]
    consumer: str
    deliveries: int = 1  # >1: earlier takers held it and never accepted it (they died)


class RequestQueue(Protocol):
    async def put(self, queue: str, message: dict[str, Any]) -> str:
        """Append a request; returns its entry id (for `withdraw`)."""

    async def take(self, queue: str, *, consumer: str) -> Taken:
        """Wait for the oldest request nobody holds; `consumer` names the taking worker."""

    async def take_any(self, queues: Sequence[str], *, consumer: str) -> Taken:
        """`take` from the first of `queues` that has a request (earlier ones first)."""

    async def accept(self, taken: Taken) -> bool:
        """Mark it served by this taker and drop it from the queue. False: it is no longer
        this taker's (withdrawn, or reclaimed by another worker): do not serve it."""

    async def hand_back(self, taken: Taken) -> None:
        """Return a taken request to the queue's head, for the next worker to take."""

    async def hand_back_all(self, queue: str, *, consumer: str) -> int:
        """Return everything `consumer` took and did not accept (a worker shutting down)."""

    async def withdraw(self, queue: str, entry_id: str) -> bool:
        """Remove a request no worker accepted yet; False if it was accepted (or unknown)."""

    async def depth(self, queue: str) -> int:
        """Requests waiting or taken but not yet accepted."""

    async def lost(self, queue: str, entry_id: str) -> bool:
        """The entry is gone though nobody accepted or withdrew it: Redis restarted without
        persistence under it. Its requester puts it again."""

    async def aclose(self) -> None: ...


def moved_queue(queue: str) -> str:
    """Where an answer whose worker died waits to go on (`chatapp/answers/relay.py`): every
    worker takes from it before `queue`, so it is not put behind the questions that came after
    it (nor timed out `busy` there)."""
    return f"{queue}.moved"


def worker_queue(queue: str, worker_id: str) -> str:
    """The queue of one worker only (routing affinity, a warm-up of every worker): the worker
    takes from it before `queue`. Whatever waits there when the worker is gone is moved to
    `queue` by its requester (see `chatapp/answers/relay.py`)."""
    return f"{queue}@{worker_id}"


def is_worker_queue(queue: str) -> bool:
    return "@" in queue


def request_queue(*, redis_url: str, reclaim_after_s: float = 10.0) -> RequestQueue:
    """The Redis Streams queue (`redis_url` empty: this process's embedded Redis)."""
    from inference.wire.stream_queue import RedisStreamQueue

    return RedisStreamQueue(redis_url=redis_url, reclaim_after_s=reclaim_after_s)
