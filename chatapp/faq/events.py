"""Push FAQ changes to every inference worker (their FAQ group on the channel layer)."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from inference.wire.protocol import FAQ_WORKERS_GROUP, FaqEntryData, FaqRemove, FaqUpsert


def faq_upsert_broadcast(*, entries: list[FaqEntryData]) -> None:
    async_to_sync(get_channel_layer().group_send)(
        FAQ_WORKERS_GROUP, FaqUpsert(entries=entries).to_channel()
    )


def faq_remove_broadcast(*, entry_ids: list[int]) -> None:
    async_to_sync(get_channel_layer().group_send)(
        FAQ_WORKERS_GROUP, FaqRemove(entry_ids=entry_ids).to_channel()
    )
