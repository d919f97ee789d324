"""The only module of `inference` that touches the Channels channel layer.

The layer object is injected: the embedded default hands over the web process's in-memory
layer, `python -m inference` builds a Redis layer from `REDIS_URL`.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from inference.protocol import WireMessage

logger = logging.getLogger(__name__)


class ChannelLayer(Protocol):
    async def send(self, channel: str, message: dict[str, Any]) -> None: ...

    async def receive(self, channel: str) -> dict[str, Any]: ...

    async def new_channel(self, prefix: str = ...) -> str: ...

    async def group_add(self, group: str, channel: str) -> None: ...

    async def group_discard(self, group: str, channel: str) -> None: ...


class Transport:
    def __init__(self, *, layer: ChannelLayer) -> None:
        self._layer = layer

    async def new_channel(self) -> str:
        return await self._layer.new_channel(prefix="inference-worker")

    async def receive(self, channel: str) -> dict[str, Any]:
        return await self._layer.receive(channel)

    async def group_add(self, group: str, channel: str) -> None:
        await self._layer.group_add(group, channel)

    async def group_discard(self, group: str, channel: str) -> None:
        await self._layer.group_discard(group, channel)

    async def send(self, channel: str, message: WireMessage) -> bool:
        """Send one event; False when the receiver is gone or not draining (channel full)."""
        try:
            await self._layer.send(channel, message.to_channel())
        except Exception as exc:  # ChannelFull and connection errors look alike to the caller
            logger.warning("send to %s failed: %s", channel, exc)
            return False
        return True


def redis_channel_layer(*, redis_url: str) -> ChannelLayer:
    from channels_redis.core import RedisChannelLayer

    layer: ChannelLayer = RedisChannelLayer(hosts=[redis_url])
    return layer
