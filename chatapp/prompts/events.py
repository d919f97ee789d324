"""Tell open chat pages that the published templates changed (one broadcast group)."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

TEMPLATES_GROUP = "templates"


def templates_changed_broadcast(*, etag: str) -> None:
    layer = get_channel_layer()
    if layer is not None:
        async_to_sync(layer.group_send)(
            TEMPLATES_GROUP, {"type": "templates.changed", "etag": etag}
        )
