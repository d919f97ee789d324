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

A message for a process-local channel of this very process (the relay here streaming to a
socket here) skips Redis: the same serialized-and-back copy waits in the process, and the
reader of the process inbox (woken if it waits on Redis) takes it before its next Redis pop,
then hands it to the channel as channels_redis does with what it read. Through Redis it cost
about eight round trips (four to send, four to read), on every delta.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Any

from channels_redis.core import RedisChannelLayer
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from inference.wire import retry

logger = logging.getLogger(__name__)

# (the channel a popped message is for, the message), as channels_redis's receive_single returns
_Popped = tuple[Any, dict[str, Any]]


class ResilientRedisChannelLayer(RedisChannelLayer):  # type: ignore[misc]  # untyped base
    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        # Reads of a Redis key whose receiver was cancelled, oldest first, per key.
        self._orphaned_reads: dict[str, collections.deque[asyncio.Task[_Popped]]] = {}
        # Messages sent here for channels of this process, oldest first (see `send`).
        self._local: collections.deque[_Popped] = collections.deque()
        self._arrived: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        if self._ours(channel):
            self._local.append((channel, self.deserialize(self.serialize(message))))
            self._local_arrived().set()  # wakes the reader waiting on Redis for the inbox
            return
        await super().send(channel, message)

    def _ours(self, channel: str) -> bool:
        """A process-local channel of this layer, sent to on the loop its receivers use (an
        event's waiters belong to their loop; from another loop or thread, Redis carries it)."""
        if "!" not in channel or not self._is_inbox(self.non_local_name(channel)):
            return False
        receiving_on = self.receive_event_loop
        return receiving_on is None or receiving_on is asyncio.get_running_loop()

    def _is_inbox(self, name: str) -> bool:
        """`name` is this process's inbox, the Redis key of all its process-local channels."""
        return name.endswith(self.client_prefix + "!")

    def _local_message(self) -> _Popped | None:
        if not self._local:
            return None
        popped = self._local.popleft()
        if not self._local:
            self._local_arrived().clear()
        return popped

    def _local_arrived(self) -> asyncio.Event:
        """Set while messages sent here wait; one per event loop (an event belongs to one)."""
        loop = asyncio.get_running_loop()
        if self._arrived is None or self._arrived[0] is not loop:
            event = asyncio.Event()
            if self._local:
                event.set()
            self._arrived = (loop, event)
        return self._arrived[1]

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
        """The next message for `channel`: for this process's inbox, one sent here (`send`)
        first, else one popped off its Redis key. A cancel, or a message sent here first,
        leaves the Redis pop to the next reader.

        channels_redis calls this with its receive lock held (one reader per process inbox), so
        an orphaned read is taken over before a new one starts, and messages keep their order.
        """
        inbox = self._is_inbox(channel)  # not a shared, named channel
        local = self._local_message() if inbox else None
        if local is not None:
            return local
        read = self._orphaned_read(channel)
        if read is None:
            read = asyncio.ensure_future(super().receive_single(channel))
        if not inbox:
            try:
                return await asyncio.shield(read)
            except asyncio.CancelledError:
                self._orphan(channel, read)
                raise
        while True:
            arrived = asyncio.ensure_future(self._local_arrived().wait())
            try:
                await asyncio.wait({read, arrived}, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                self._orphan(channel, read)
                raise
            finally:
                arrived.cancel()
            if read.done():
                return read.result()  # what was sent here meanwhile is the next call's
            local = self._local_message()
            if local is not None:
                self._orphan(channel, read)
                return local

    def _orphan(self, channel: str, read: asyncio.Task[_Popped]) -> None:
        """Keep a Redis pop whose reader went away for the next reader of `channel`."""
        if read.done() and (read.cancelled() or read.exception() is not None):
            return
        read.add_done_callback(_retrieve_failure)
        self._orphaned_reads.setdefault(channel, collections.deque()).append(read)

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
