"""channels_redis's layer, riding out a Redis restart on receive and losing nothing to a cancel.

An exception out of `receive` ends whoever waits on it: a Channels consumer dies (the browser
sees its socket close with 1011), a relay or worker loop has to catch it. Waiting for Redis to
come back instead keeps sockets open through a restart; messages sent meanwhile are retried by
their senders (see `Transport.send`).

Every process-local channel of a process (its relay's, each socket's) shares one Redis inbox,
read by whichever receiver holds channels_redis's receive lock, for all of them. A cancelled
receive (a socket closing, a receive under a timeout) cancelled that read too: a message Redis
had already popped for the reader (BZPOPMIN) was dropped with the connection, whoever it was
for, e.g. a delta on its way to the relay. So the read runs in a task of its own that a cancel
does not reach; when its receiver is gone, the next reader of that inbox takes it over.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Any

from channels_redis.core import RedisChannelLayer
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from inference import retry

logger = logging.getLogger(__name__)

# (the channel a popped message is for, the message), as channels_redis's receive_single returns
_Popped = tuple[Any, dict[str, Any]]


class ResilientRedisChannelLayer(RedisChannelLayer):  # type: ignore[misc]  # untyped base
    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        # Reads of a Redis key whose receiver was cancelled, oldest first, per key.
        self._orphaned_reads: dict[str, collections.deque[asyncio.Task[_Popped]]] = {}

    async def receive(self, channel: str) -> dict[str, Any]:
        backoff = retry.RECEIVE.start()
        while True:
            try:
                message: dict[str, Any] = await super().receive(channel)
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                logger.warning("receive on %s failed (%s); retrying", channel, exc)
                await backoff.sleep()
                continue
            return message

    async def receive_single(self, channel: str) -> _Popped:
        """Pop one message off `channel`'s Redis key; a cancel leaves the pop to the next reader.

        channels_redis calls this with its receive lock held (one reader per process inbox), so
        an orphaned read is taken over before a new one starts, and messages keep their order.
        """
        read = self._orphaned_read(channel)
        if read is None:
            read = asyncio.ensure_future(super().receive_single(channel))
        try:
            return await asyncio.shield(read)
        except asyncio.CancelledError:
            if not read.cancelled():  # our receiver went away, the read did not: keep it
                read.add_done_callback(_retrieve_failure)
                self._orphaned_reads.setdefault(channel, collections.deque()).append(read)
            raise

    def _orphaned_read(self, channel: str) -> asyncio.Task[_Popped] | None:
        reads = self._orphaned_reads.get(channel)
        loop = asyncio.get_running_loop()
        while reads:
            read = reads.popleft()
            if read.get_loop() is loop:  # a read of a closed event loop can never finish
                return read
        self._orphaned_reads.pop(channel, None)
        return None


def _retrieve_failure(read: asyncio.Task[_Popped]) -> None:
    # An orphaned read that fails (Redis went away) and is never taken over is no error to log:
    # whoever reads next reads again.
    if not read.cancelled():
        read.exception()
