"""channels_redis's layer, riding out a Redis restart on receive.

An exception out of `receive` ends whoever waits on it: a Channels consumer dies (the browser
sees its socket close with 1011), a relay or worker loop has to catch it. Waiting for Redis to
come back instead keeps sockets open through a restart; messages sent meanwhile are retried by
their senders (see `Transport.send`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels_redis.core import RedisChannelLayer
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)


class ResilientRedisChannelLayer(RedisChannelLayer):  # type: ignore[misc]  # untyped base
    async def receive(self, channel: str) -> dict[str, Any]:
        backoff = 0.1
        while True:
            try:
                message: dict[str, Any] = await super().receive(channel)
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                logger.warning("receive on %s failed (%s); retrying", channel, exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            return message
