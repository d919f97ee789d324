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

Two implementations: `RedisStreamQueue` (`inference/wire/stream_queue.py`, Redis Streams consumer
groups) for workers in their own processes, and `LocalRequestQueue` here for the embedded
default, where the worker runs in the web process. `request_queue(redis_url=...)` picks one.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
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


@dataclass
class _LocalQueue:
    waiting: collections.deque[tuple[str, dict[str, Any]]] = field(
        default_factory=collections.deque
    )
    taken: dict[str, Taken] = field(default_factory=dict)
    # takers waiting for a put: their loop and the future that wakes them
    takers: collections.deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = field(
        default_factory=collections.deque
    )


class LocalRequestQueue:
    """The embedded default's queue: one per process, shared by the web code and the worker.

    Safe across threads and event loops (a Django sync view reaches it through
    `async_to_sync`, on a loop of its own): state is under a plain lock and takers are woken
    with `call_soon_threadsafe`. Nothing outlives the process, and nothing needs to: the worker
    dies with it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, _LocalQueue] = {}
        self._ids = itertools.count(1)
        self._woken: set[asyncio.Future[None]] = set()

    def clear(self) -> None:
        """Forget every request (tests: each starts with an empty queue)."""
        with self._lock:
            self._queues.clear()

    def _queue(self, name: str) -> _LocalQueue:
        return self._queues.setdefault(name, _LocalQueue())

    async def put(self, queue: str, message: dict[str, Any]) -> str:
        with self._lock:
            entry_id = str(next(self._ids))
            state = self._queue(queue)
            state.waiting.append((entry_id, message))
            self._wake_one(state)
        return entry_id

    async def take(self, queue: str, *, consumer: str) -> Taken:
        return await self.take_any([queue], consumer=consumer)

    async def take_any(self, queues: Sequence[str], *, consumer: str) -> Taken:
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                states = [(queue, self._queue(queue)) for queue in queues]
                for queue, state in states:
                    if state.waiting:
                        entry_id, message = state.waiting.popleft()
                        taken = Taken(
                            queue=queue, entry_id=entry_id, message=message, consumer=consumer
                        )
                        state.taken[entry_id] = taken
                        return taken
                # one future, registered with every queue: whichever gets a put wakes it
                woken: asyncio.Future[None] = loop.create_future()
                for _, state in states:
                    state.takers.append((loop, woken))
            try:
                await woken
            except asyncio.CancelledError:
                with self._lock:
                    for _, state in states:
                        if (loop, woken) in state.takers:
                            state.takers.remove((loop, woken))
                        elif state.waiting:  # woken for a request it will not take: pass it on
                            self._wake_one(state)
                raise
            finally:
                with self._lock:
                    self._woken.discard(woken)
                    for _, state in states:
                        if (loop, woken) in state.takers:
                            state.takers.remove((loop, woken))

    async def accept(self, taken: Taken) -> bool:
        with self._lock:
            return self._queue(taken.queue).taken.pop(taken.entry_id, None) is not None

    async def hand_back(self, taken: Taken) -> None:
        with self._lock:
            state = self._queue(taken.queue)
            if state.taken.pop(taken.entry_id, None) is not None:
                state.waiting.appendleft((taken.entry_id, taken.message))
                self._wake_one(state)

    async def hand_back_all(self, queue: str, *, consumer: str) -> int:
        with self._lock:
            state = self._queue(queue)
            mine = [t for t in state.taken.values() if t.consumer == consumer]
        for taken in reversed(mine):  # the oldest ends up first
            await self.hand_back(taken)
        return len(mine)

    async def withdraw(self, queue: str, entry_id: str) -> bool:
        with self._lock:
            state = self._queue(queue)
            if state.taken.pop(entry_id, None) is not None:
                return True
            for index, (waiting_id, _) in enumerate(state.waiting):
                if waiting_id == entry_id:
                    del state.waiting[index]
                    return True
        return False

    async def depth(self, queue: str) -> int:
        with self._lock:
            state = self._queue(queue)
            return len(state.waiting) + len(state.taken)

    async def lost(self, queue: str, entry_id: str) -> bool:
        return False  # it lives and dies with the process that asks

    async def aclose(self) -> None:
        return None

    def _wake_one(self, state: _LocalQueue) -> None:
        """Wake the longest-waiting taker not woken yet (under the lock)."""
        while state.takers:
            loop, woken = state.takers.popleft()
            if not loop.is_closed() and woken not in self._woken:
                self._woken.add(woken)  # a taker of several queues is woken once
                loop.call_soon_threadsafe(_set_once, woken)
                return


def _set_once(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)


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


_local_queue = LocalRequestQueue()


def local_request_queue() -> LocalRequestQueue:
    """The process's one in-memory queue (the embedded default's)."""
    return _local_queue


def request_queue(*, redis_url: str, reclaim_after_s: float = 10.0) -> RequestQueue:
    """Redis Streams when `redis_url` is set; else the process's in-memory queue, so the
    embedded worker and the web code of one process share it."""
    if redis_url:
        from inference.wire.stream_queue import RedisStreamQueue

        return RedisStreamQueue(redis_url=redis_url, reclaim_after_s=reclaim_after_s)
    return _local_queue
