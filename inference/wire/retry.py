"""The one retry policy: exponential backoff, capped, for every loop that waits out Redis
restarting or a reader lagging. Only the first delay and the cap differ by purpose; what a
call site retries (and when it gives up) stays with it.

(redis-py's own command retries are configured in `inference/wire/redis_client.py`: they run inside
the client, for single idempotent commands.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    first_s: float
    cap_s: float

    def start(self) -> Backoff:
        return Backoff(policy=self)


@dataclass(slots=True)
class Backoff:
    """One run of retries: each `delay()` doubles the last, up to the cap."""

    policy: BackoffPolicy
    _next_s: float = field(init=False)

    def __post_init__(self) -> None:
        self._next_s = self.policy.first_s

    def delay(self) -> float:
        delay = self._next_s
        self._next_s = min(delay * 2, self.policy.cap_s)
        return delay

    async def sleep(self, *, at_most_s: float | None = None) -> None:
        delay = self.delay()
        await asyncio.sleep(delay if at_most_s is None else max(0.0, min(delay, at_most_s)))

    def reset(self) -> None:
        self._next_s = self.policy.first_s


# A receive loop (relay, worker, channel layer) while Redis restarts: keep trying, slowly.
RECEIVE = BackoffPolicy(first_s=0.1, cap_s=2.0)
# A send of an answer's event while Redis restarts: retried briefly, then given up.
SEND = BackoffPolicy(first_s=0.1, cap_s=1.0)
# A reader whose channel is full: it lags a moment; check again soon.
FULL_CHANNEL = BackoffPolicy(first_s=0.02, cap_s=0.5)


def stop_if_cancelled() -> None:
    """Raise CancelledError when this task was asked to stop: call it at the top of a loop
    that retries on errors. redis-py can swallow a cancel that lands inside its read timeout
    (redis/redis-py#2551, #2028; measured with 8.1 on XAUTOCLAIM: a stopping worker's taker
    went on taking), so such a loop must not rely on the CancelledError alone."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def until_done(call: Callable[[], Awaitable[T]], *, what: str) -> T:
    """`call()` until it returns, waiting out Redis restarting with the `RECEIVE` backoff:
    what a long-lived reader (a worker taking requests, a relay or worker receiving) does, so
    an outage is waited out instead of ending it. Each failure is logged as "`what` failed";
    only a cancel stops it."""
    backoff = RECEIVE.start()
    while True:
        stop_if_cancelled()
        try:
            return await call()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.warning("%s failed (%s); retrying", what, exc)
            await backoff.sleep()
