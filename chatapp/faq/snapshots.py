"""Answers workers' start-up requests for the full FAQ set (runs in every web process)."""

from __future__ import annotations

import logging

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from chatapp.faq import selectors
from inference.protocol import FAQ_SNAPSHOT_CHANNEL, FaqSnapshotChunk, FaqSnapshotRequest

logger = logging.getLogger(__name__)


async def serve_snapshots() -> None:
    layer = get_channel_layer()
    while True:
        raw = await layer.receive(FAQ_SNAPSHOT_CHANNEL)
        try:
            request = FaqSnapshotRequest.model_validate(raw)
            chunks = await database_sync_to_async(lambda: list(selectors.snapshot_chunks()))()
            for index, chunk in enumerate(chunks):
                await layer.send(
                    request.reply_channel,
                    FaqSnapshotChunk(entries=chunk, last=index == len(chunks) - 1).to_channel(),
                )
        except Exception:  # one bad request must not stop the responder
            logger.exception("FAQ snapshot request failed")
