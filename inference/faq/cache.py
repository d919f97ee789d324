"""The worker's FAQ cache: keeps the index in sync with the web side and answers lookups.

Entries arrive with vectors computed by Celery (the same embedding model), as a snapshot at
start-up and as upserts/removals whenever an admin changes an entry, so a worker picks up
changes without a restart. A lookup embeds the question (off the event loop), searches the
allowed scopes and applies the calibrated threshold and lexical guard (`matcher.decide`).
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from inference.faq.embedder import Embedder
from inference.faq.index import FaqIndex, IndexedEntry
from inference.faq.matcher import decide
from inference.protocol import FaqEntryData, FaqRemove, FaqSnapshotChunk, FaqUpsert

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FaqHit:
    entry_id: int
    answer: str
    score: float


def entry_from_wire(data: FaqEntryData) -> IndexedEntry:
    vectors = np.frombuffer(base64.b64decode(data.vectors_b64), dtype=np.float32)
    return IndexedEntry(
        entry_id=data.entry_id,
        scope=data.scope,
        answer=data.answer,
        phrasings=list(data.phrasings),
        vectors=vectors.reshape(len(data.phrasings), -1).copy(),
    )


def vectors_to_wire(vectors: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(vectors, dtype=np.float32).tobytes()).decode()


class FaqCache:
    def __init__(self, *, embedder: Embedder, index: FaqIndex | None = None) -> None:
        self._embedder = embedder
        self.index = index or FaqIndex()
        self._snapshot: list[IndexedEntry] = []

    def apply(self, message: FaqUpsert | FaqRemove | FaqSnapshotChunk) -> None:
        if isinstance(message, FaqUpsert):
            for data in message.entries:
                self.index.upsert(entry_from_wire(data))
        elif isinstance(message, FaqRemove):
            for entry_id in message.entry_ids:
                self.index.remove(entry_id)
        else:
            self._snapshot.extend(entry_from_wire(data) for data in message.entries)
            if message.last:
                self.index.replace_all(self._snapshot)
                logger.info("FAQ index loaded: %d entries", len(self._snapshot))
                self._snapshot = []

    async def lookup(self, *, question: str, scopes: Sequence[str]) -> FaqHit | None:
        if not question.strip() or self.index.is_empty:
            return None
        vector = (await asyncio.to_thread(self._embedder.encode, [question]))[0]
        candidates = self.index.search_phrasings(query_vector=vector, scopes=scopes)
        decision = decide(query=question, candidates=candidates)
        if decision is None or not decision.accepted:
            return None
        answer = self.index.answer(decision.entry_id)
        if answer is None:
            return None
        return FaqHit(entry_id=decision.entry_id, answer=answer, score=decision.score)
