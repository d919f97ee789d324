"""The only module of `inference` that touches the Channels channel layer.

The layer object is injected: the embedded default hands over the web process's in-memory
layer, `python -m inference` builds a Redis layer from `REDIS_URL`.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from channels.exceptions import ChannelFull
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from inference.wire import retry
from inference.wire.protocol import WireMessage

logger = logging.getLogger(__name__)


class ChannelLayer(Protocol):
    async def send(self, channel: str, message: dict[str, Any]) -> None: ...

    async def receive(self, channel: str) -> dict[str, Any]: ...

    async def new_channel(self, prefix: str = ...) -> str: ...

    async def group_add(self, group: str, channel: str) -> None: ...

    async def group_discard(self, group: str, channel: str) -> None: ...


class Receiver(Protocol):
    async def receive(self, channel: str) -> dict[str, Any]: ...


async def receive_retrying(receiver: Receiver, channel: str) -> dict[str, Any]:
    """Receive, riding out a Redis restart: what a long-lived reader (a worker's control
    channel, a relay) does, so an outage is waited out instead of ending the reader. What was
    lost meanwhile is the senders' and the watchdogs' business (the stream's `seq` shows it)."""
    return await retry.until_done(lambda: receiver.receive(channel), what=f"receive on {channel}")


async def serve_requests(
    layer: ChannelLayer,
    channel: str,
    answer: Callable[[dict[str, Any]], Awaitable[None]],
    *,
    log: logging.Logger,
    failure: str,
) -> None:
    """Answer each request that comes on `channel`, forever (a web process answering workers'
    requests). A request whose answer fails is logged with `failure` and the next one answered:
    one bad request must not stop the responder."""
    while True:
        raw = await layer.receive(channel)
        try:
            await answer(raw)
        except Exception:
            log.exception(failure)


class SendResult(enum.Enum):
    """How a send ended; truthy only when the event was delivered to the channel."""

    SENT = "sent"
    FULL = "full"  # the receiver did not drain its channel for `full_retry_s`
    FAILED = "failed"  # the layer stayed unreachable for `retry_s`, or refused the event

    def __bool__(self) -> bool:
        return self is SendResult.SENT


class Transport:
    def __init__(self, *, layer: ChannelLayer, full_retry_s: float = 3.0) -> None:
        self._layer = layer
        # A full channel means a slow receiver, not a gone one: wait this long for it to drain.
        self._full_retry_s = full_retry_s

    async def new_channel(self) -> str:
        return await self._layer.new_channel()  # one prefix per process: see AnswerRelay.run

    async def receive(self, channel: str) -> dict[str, Any]:
        return await self._layer.receive(channel)

    async def group_add(self, group: str, channel: str) -> None:
        await self._layer.group_add(group, channel)

    async def group_discard(self, group: str, channel: str) -> None:
        await self._layer.group_discard(group, channel)

    async def send(
        self,
        channel: str,
        message: WireMessage,
        *,
        retry_s: float = 5.0,
        full_retry_s: float | None = None,
    ) -> SendResult:
        """Send one event; falsy (FULL or FAILED) when it could not be delivered.

        A Redis that is restarting is waited for (up to `retry_s`), so a short outage loses
        no delta of an answer in flight; a full channel is retried with a short backoff for
        `full_retry_s` (default: the transport's), so a reader that lags a moment loses
        nothing either.
        """
        now = time.monotonic()
        deadline = now + retry_s
        full_deadline = now + (self._full_retry_s if full_retry_s is None else full_retry_s)
        backoff, full_backoff = retry.SEND.start(), retry.FULL_CHANNEL.start()
        while True:
            try:
                await self._layer.send(channel, message.to_channel())
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                delay = backoff.delay()
                if time.monotonic() + delay > deadline:
                    logger.warning("send to %s failed: %s", channel, exc)
                    return SendResult.FAILED
                await asyncio.sleep(delay)
                continue
            except ChannelFull:
                left = full_deadline - time.monotonic()
                if left <= 0:
                    logger.warning(
                        "channel %s stayed full; gave up on a %s", channel, type(message).__name__
                    )
                    return SendResult.FULL
                await full_backoff.sleep(at_most_s=left)
                continue
            except Exception as exc:  # anything else the layer refuses: not worth retrying
                logger.warning("send to %s failed: %s", channel, exc)
                return SendResult.FAILED
            return SendResult.SENT


def redis_layer_config(*, redis_url: str, expiry_s: float = 60) -> dict[str, Any]:
    """The Redis channel layer's settings, the same for web processes and workers.

    `expiry_s`: how long a message sent by this process may wait to be read (channels_redis
    drops older ones; its default is 60 s). A web process sends the requests that wait in
    `inference.requests` for a free worker, so its expiry must outlast the queue timeout.
    """
    from inference.wire.redis_client import SOCKET_TIMEOUT_S, keepalive_options

    return {
        # channels_redis passes every other key of a host to redis-py's ConnectionPool.
        "hosts": [
            {
                "address": redis_url,
                # redis-py's default 5 s socket timeout fires inside channels_redis's 5 s
                # blocking read: an idle consumer would crash every few seconds
                # (channels_redis#422). So no read timeout here; TCP keepalive is what notices
                # a peer that vanished without closing the connection (~45 s).
                "socket_timeout": None,
                "socket_connect_timeout": SOCKET_TIMEOUT_S,
                "socket_keepalive": True,
                "socket_keepalive_options": keepalive_options(),
            }
        ],
        # a relay channel carries every event of every answer of its web process
        "capacity": 5000,
        "expiry": max(1, math.ceil(expiry_s)),
    }


def redis_channel_layer(*, redis_url: str) -> ChannelLayer:
    from inference.wire.resilient_layer import ResilientRedisChannelLayer

    layer: ChannelLayer = ResilientRedisChannelLayer(**redis_layer_config(redis_url=redis_url))
    return layer
