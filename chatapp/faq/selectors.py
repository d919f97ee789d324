"""Reads for the FAQ: what workers index."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from chatapp.faq.models import FaqEntry
from inference.faq.cache import vectors_to_wire
from inference.protocol import FaqEntryData

SNAPSHOT_CHUNK = 500


def entry_data(entry: FaqEntry) -> FaqEntryData | None:
    """The wire form of an entry, or None while its vectors are missing or stale."""
    if not entry.enabled or entry.vectors is None or entry.embedded_phrasings != entry.phrasings:
        return None
    vectors = np.frombuffer(bytes(entry.vectors), dtype=np.float32)
    return FaqEntryData(
        entry_id=entry.pk,
        scope=entry.scope,
        answer=entry.answer,
        phrasings=list(entry.embedded_phrasings),
        vectors_b64=vectors_to_wire(vectors.reshape(len(entry.embedded_phrasings), -1)),
    )


def snapshot_chunks() -> Iterator[list[FaqEntryData]]:
    chunk: list[FaqEntryData] = []
    for entry in FaqEntry.objects.filter(enabled=True).exclude(vectors=None).iterator():
        data = entry_data(entry)
        if data is None:
            continue
        chunk.append(data)
        if len(chunk) >= SNAPSHOT_CHUNK:
            yield chunk
            chunk = []
    yield chunk
