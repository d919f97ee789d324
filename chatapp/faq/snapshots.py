"""Answers workers' requests for the FAQ set (runs in every web process).

A `FaqSnapshotRequest` gets the full set. A `FaqSyncRequest` (every few seconds from each
worker, `inference/faq/sync.py`) gets the full set only when the worker's version differs from
this side's, then a `FaqInSync` confirming the version the worker now should have.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from chatapp.faq import selectors, worker_status
from inference.faq.sync import data_version, set_version
from inference.wire.protocol import (
    FAQ_SNAPSHOT_CHANNEL,
    FaqEntryData,
    FaqInSync,
    FaqSnapshotChunk,
    FaqSyncRequest,
    faq_snapshot_serve_adapter,
)
from inference.wire.transport import ChannelLayer, serve_requests

logger = logging.getLogger(__name__)


async def serve_snapshots(*, layer: ChannelLayer | None = None) -> None:
    layer = layer or get_channel_layer()
    assert layer is not None

    async def answer(raw: dict[str, Any]) -> None:
        request = faq_snapshot_serve_adapter.validate_python(raw)
        if isinstance(request, FaqSyncRequest):
            await _sync(layer, request)
        else:
            await _send_snapshot(layer, request.reply_channel, await _snapshot())

    await serve_requests(
        layer, FAQ_SNAPSHOT_CHANNEL, answer, log=logger, failure="FAQ snapshot request failed"
    )


async def _snapshot() -> list[list[FaqEntryData]]:
    chunks: list[list[FaqEntryData]] = await database_sync_to_async(
        lambda: list(selectors.snapshot_chunks())
    )()
    return chunks


async def _send_snapshot(
    layer: ChannelLayer, reply_channel: str, chunks: list[list[FaqEntryData]]
) -> None:
    for index, chunk in enumerate(chunks):
        await layer.send(
            reply_channel,
            FaqSnapshotChunk(entries=chunk, last=index == len(chunks) - 1).to_channel(),
        )


async def _sync(layer: ChannelLayer, request: FaqSyncRequest) -> None:
    try:  # what decides the worker's answers, for the admin; never in the sync's way
        await asyncio.to_thread(
            worker_status.record, worker=request.reply_channel, decision=request.decision
        )
    except Exception:
        logger.exception("could not record the worker's FAQ decision")
    version = await database_sync_to_async(selectors.served_set_version)()
    if version != request.version:
        chunks = await _snapshot()
        # confirm what was sent, even if the set changed between the two reads
        version = set_version(
            (data.entry_id, data_version(data)) for chunk in chunks for data in chunk
        )
        await _send_snapshot(layer, request.reply_channel, chunks)
    await layer.send(
        request.reply_channel, FaqInSync(version=version, sent_at=request.sent_at).to_channel()
    )
