"""Reads for the FAQ: what workers index."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from chatapp.faq.models import FaqEntry
from inference.faq.cache import vectors_to_wire
from inference.faq.sync import entry_version, set_version
from inference.wire.protocol import FaqEntryData

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


def served_set_version() -> str:
    """The version (`inference.faq.sync`) of the set `snapshot_chunks` would send, without
    reading any vectors: workers ask for it every few seconds."""
    versions = []
    entries = FaqEntry.objects.filter(enabled=True).exclude(vectors=None).defer("vectors")
    for entry in entries.iterator():
        if entry.embedded_phrasings != entry.phrasings:  # stale vectors: not served yet
            continue
        versions.append(
            (
                entry.pk,
                entry_version(
                    entry_id=entry.pk,
                    scope=entry.scope,
                    answer=entry.answer,
                    phrasings=list(entry.embedded_phrasings),
                ),
            )
        )
    return set_version(versions)


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
