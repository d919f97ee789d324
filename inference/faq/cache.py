"""The worker's FAQ cache: keeps the index in sync with the web side and answers lookups.

Entries arrive with vectors computed by Celery (the same embedding model), as upserts/removals
whenever an admin changes an entry, so a worker picks up changes without a restart, and as a
snapshot of the whole set whenever the worker's periodic sync finds its set differs from the
web side's (`sync.py`: how a lost broadcast or request is repaired, and the freshness bound).
A lookup embeds the question (off the event loop), searches the allowed scopes and lets its
decider (`deciders.py`: the learned verifier) say which entry, if any, the question asks
(off the loop too: the verifier costs milliseconds); a question refused comes back as a
`FaqNear` when it came close to an entry (the admin is shown it as a suggested phrasing) or
the decision was unsure between likely entries (the customer is offered them).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from inference.faq.candidates import Candidate
from inference.faq.deciders import FaqDecider
from inference.faq.embedder import Embedder
from inference.faq.index import FaqIndex, IndexedEntry
from inference.faq.sync import STALE_AFTER_RESYNCS, data_version, resync_s_from_env, set_version
from inference.wire.protocol import (
    FaqEntryData,
    FaqInSync,
    FaqRemove,
    FaqSnapshotChunk,
    FaqUpsert,
    SuggestedEntry,
)

logger = logging.getLogger(__name__)

# A refused question whose best entry scores at least this is shown to the admin as a suggested
# phrasing of it (no answer depends on it: an admin decides). Paraphrases in the labelled pairs
# score from 0.37; below 0.50 the suggestions would be mostly unrelated questions.
SUGGEST_FLOOR = 0.50


@dataclass(frozen=True, slots=True)
class FaqHit:
    entry_id: int
    answer: str
    score: float


@dataclass(frozen=True, slots=True)
class FaqNear:
    """No hit. `entry_id`: the question came close to this entry (`SUGGEST_FLOOR`), so the
    admin is shown the question as a suggested phrasing of it; `suggestions`: the entries the
    verifier found likely but could not choose between (or not surely enough)."""

    entry_id: int | None
    score: float
    suggestions: tuple[SuggestedEntry, ...] = ()


FaqLookupResult = FaqHit | FaqNear | None


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
    """The index plus what keeps it honest: the version of the set it holds and when the web
    side last confirmed that set (`sync.py`).

    Freshness is enforced once a sync loop drives the cache (`begin_sync`, as the worker
    does); a cache fed by hand (tests, benches) answers from whatever it was given.
    """

    def __init__(
        self,
        *,
        embedder: Embedder,
        decider: FaqDecider,
        index: FaqIndex | None = None,
        resync_s: float | None = None,
        max_stale_s: float | None = None,
    ) -> None:
        self._embedder = embedder
        self.decider = decider
        self.index = index or FaqIndex()
        self.resync_s = resync_s if resync_s is not None else resync_s_from_env()
        self.max_stale_s = (
            max_stale_s if max_stale_s is not None else STALE_AFTER_RESYNCS * self.resync_s
        )
        self._snapshot: list[FaqEntryData] = []
        self._versions: dict[int, str] = {}  # of the entries in the index
        self._sync_driven = False
        self._fresh_as_of: float | None = None  # monotonic; None: never confirmed
        self._said_stale = False
        # run by the worker while the decider is not at full strength (the verifier is being
        # trained: `verifier_pickup.py`); it swaps `decider` when it is done
        self.until_ready: Callable[[], Coroutine[Any, Any, None]] | None = None

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    @property
    def version(self) -> str:
        """The digest of the set this index holds (`sync.set_version`)."""
        return set_version(self._versions.items())

    def begin_sync(self) -> str:
        """A sync request goes out now: the version to send.

        A snapshot still half-received belongs to an earlier request whose rest was lost:
        dropped, so its entries never mix into the next one.
        """
        self._sync_driven = True
        self._snapshot = []
        return self.version

    def fresh(self, now: float | None = None) -> bool:
        if not self._sync_driven:
            return True
        if self._fresh_as_of is None:
            return False
        now = time.monotonic() if now is None else now
        return now - self._fresh_as_of <= self.max_stale_s

    def apply(self, message: FaqUpsert | FaqRemove | FaqSnapshotChunk | FaqInSync) -> None:
        if isinstance(message, FaqUpsert):
            for data in message.entries:
                self.index.upsert(entry_from_wire(data))
                self._versions[data.entry_id] = data_version(data)
        elif isinstance(message, FaqRemove):
            for entry_id in message.entry_ids:
                self.index.remove(entry_id)
                self._versions.pop(entry_id, None)
        elif isinstance(message, FaqInSync):
            # Only a confirmation of the set held now counts: a broadcast applied since the
            # request, or a lost snapshot chunk, leaves it for the next sync to settle.
            if message.version == self.version and (
                self._fresh_as_of is None or message.sent_at > self._fresh_as_of
            ):
                self._fresh_as_of = message.sent_at
                self._said_stale = False
        else:
            self._snapshot.extend(message.entries)
            if message.last:
                entries, self._snapshot = self._snapshot, []
                try:
                    self.index.replace_all(entry_from_wire(data) for data in entries)
                except ValueError:  # the old index stays; no confirmation until it is fixed
                    logger.exception("FAQ snapshot rejected")
                    return
                self._versions = {data.entry_id: data_version(data) for data in entries}
                logger.info("FAQ index loaded: %d entries", len(self._versions))

    async def lookup(self, *, question: str, scopes: Sequence[str]) -> FaqLookupResult:
        if not question.strip() or self.index.is_empty:
            return None
        if not self.fresh():  # unconfirmed for too long: it may hold removed entries
            if not self._said_stale:
                self._said_stale = True
                logger.warning(
                    "FAQ set not confirmed by the web side for %.0f s: answering with the "
                    "model until it is",
                    self.max_stale_s,
                )
            return None
        vector = (await asyncio.to_thread(self._embedder.encode, [question]))[0]
        candidates = self.index.search_phrasings(query_vector=vector, scopes=scopes)
        if not candidates:
            return None
        if not self.decider.off_loop:
            choice = self.decider.decide(query=question, candidates=candidates)
        else:
            choice = await asyncio.to_thread(
                self.decider.decide, query=question, candidates=candidates
            )
        decision = choice.decision
        if decision is None:
            return None
        if not decision.accepted:
            suggestions = tuple(self._suggested(choice.suggestions))
            near = decision.entry_id if decision.score >= SUGGEST_FLOOR else None
            if near is None and not suggestions:
                return None
            return FaqNear(entry_id=near, score=decision.score, suggestions=suggestions)
        answer = self.index.answer(decision.entry_id)
        if answer is None:
            return None
        return FaqHit(entry_id=decision.entry_id, answer=answer, score=decision.score)

    def _suggested(self, candidates: Sequence[Candidate]) -> Iterator[SuggestedEntry]:
        for candidate in candidates:
            phrasings = self.index.phrasings(candidate.entry_id)
            if phrasings:  # removed since the lookup began: not offered
                yield SuggestedEntry(entry_id=candidate.entry_id, question=phrasings[0])
