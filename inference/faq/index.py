"""In-memory FAQ vectors: one float32 matrix per scope, best phrasing per entry on search.

Scopes are "global" and "template:<id>"; a lookup names the scopes it may use. Each entry has
several phrasings (the question and its alternates), one unit vector per phrasing, computed
elsewhere (Celery) with the same `Embedder`. A search is one matrix-vector product per scope
plus a per-entry max (`np.maximum.reduceat` over the entry's contiguous rows).

Mutations only mark a scope stale; the matrix is rebuilt on the next search (or `compact()`),
so a burst of upserts costs one rebuild, not one per entry. After a rebuild every entry's
vectors are views into the scope's matrix, so the index holds each vector once and a removed
or replaced entry's rows are freed with the old matrix. Not thread-safe: it lives on the
worker's single asyncio loop.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from inference.faq.candidates import Candidate
from inference.faq.embedder import DIMENSIONS

_SCOPE = re.compile(r"^(?:global|template:[0-9]+)$")
GLOBAL_SCOPE = "global"

FloatMatrix = npt.NDArray[np.float32]


_blas_controller: Any = None


def _single_threaded_blas() -> contextlib.AbstractContextManager[Any]:
    """Run numpy's BLAS on the calling thread only, for the duration of one search.

    Measured on 2 cores: with OpenBLAS's own thread pool, its spinning workers and torch's
    (the query embedding) starve each other: lookup p95 107 ms instead of 10 ms. One thread
    is also faster for this memory-bound matrix-vector product. threadpoolctl comes with
    sentence-transformers (via scikit-learn); without it, numpy runs as configured.
    """
    global _blas_controller
    if _blas_controller is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _blas_controller = False
        else:
            _blas_controller = ThreadpoolController()
    if _blas_controller is False:
        return contextlib.nullcontext()
    limited: contextlib.AbstractContextManager[Any] = _blas_controller.limit(
        limits=1, user_api="blas"
    )
    return limited


def template_scope(template_id: int) -> str:
    return f"template:{template_id}"


@dataclass(frozen=True, slots=True)
class IndexedEntry:
    """One FAQ entry as the worker indexes it: row i of `vectors` embeds `phrasings[i]`."""

    entry_id: int
    scope: str
    answer: str
    phrasings: list[str]
    # (len(phrasings), dim); any float dtype, the index keeps its own unit float32 copy
    vectors: npt.NDArray[np.floating[Any]]


@dataclass(slots=True)
class _Stored:
    entry_id: int
    answer: str
    phrasings: tuple[str, ...]
    vectors: FloatMatrix  # own array until the scope is rebuilt, then a view into its matrix


def _check(entry: IndexedEntry, dim: int) -> None:
    if not _SCOPE.match(entry.scope):
        raise ValueError(f"invalid FAQ scope {entry.scope!r}")
    if not entry.phrasings:
        raise ValueError(f"FAQ entry {entry.entry_id} has no phrasings")
    shape = np.shape(entry.vectors)
    if shape != (len(entry.phrasings), dim):
        raise ValueError(
            f"FAQ entry {entry.entry_id}: vectors have shape {shape}, "
            f"expected ({len(entry.phrasings)}, {dim})"
        )


def _fill_unit_rows(out: FloatMatrix, vectors: npt.ArrayLike) -> None:
    """Copy `vectors` into `out` (the index's own buffer) as unit rows; the caller's buffer
    (e.g. decoded from the wire) is never kept."""
    out[...] = vectors
    if not np.isfinite(out).all():
        raise ValueError("vectors contain NaN or infinity")
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ValueError("a vector is all zeros")
    # Cosine = dot product only for unit vectors; re-normalising is cheap and makes it certain.
    out /= norms


class _Scope:
    __slots__ = ("dim", "dirty", "entries", "matrix", "starts")

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.entries: dict[int, _Stored] = {}
        self.matrix: FloatMatrix = np.zeros((0, dim), dtype=np.float32)
        self.starts: npt.NDArray[np.intp] = np.zeros(0, dtype=np.intp)
        self.dirty = False

    def build(self) -> None:
        stored = list(self.entries.values())
        counts = np.fromiter((len(item.phrasings) for item in stored), dtype=np.intp)
        if stored:
            self.matrix = np.concatenate([item.vectors for item in stored], axis=0)
            self.starts = (np.cumsum(counts) - counts).astype(np.intp)
        else:
            self.matrix = np.zeros((0, self.dim), dtype=np.float32)
            self.starts = np.zeros(0, dtype=np.intp)
        for item, start, count in zip(stored, self.starts, counts, strict=True):
            # Drop each entry's own array: from now on its rows live only in the matrix.
            item.vectors = self.matrix[start : start + count]
        self.dirty = False


class FaqIndex:
    def __init__(self, *, dim: int = DIMENSIONS) -> None:
        self._dim = dim
        self._scopes: dict[str, _Scope] = {}
        self._scope_of: dict[int, str] = {}

    # --- writes ---------------------------------------------------------------------------

    def replace_all(self, entries: Iterable[IndexedEntry]) -> None:
        """The whole index becomes `entries` (a snapshot; a repeated id: the last one wins).

        Each scope's matrix is allocated once and filled in place (no per-entry copies), and
        nothing changes if any entry is invalid.
        """
        latest: dict[int, IndexedEntry] = {}
        for entry in entries:
            _check(entry, self._dim)
            latest.pop(entry.entry_id, None)
            latest[entry.entry_id] = entry
        grouped: dict[str, list[IndexedEntry]] = {}
        for entry in latest.values():
            grouped.setdefault(entry.scope, []).append(entry)
        scopes: dict[str, _Scope] = {}
        for name, group in grouped.items():
            scope = _Scope(self._dim)
            counts = np.fromiter((len(entry.phrasings) for entry in group), dtype=np.intp)
            scope.starts = (np.cumsum(counts) - counts).astype(np.intp)
            scope.matrix = np.empty((int(counts.sum()), self._dim), dtype=np.float32)
            for entry, start, count in zip(group, scope.starts, counts, strict=True):
                block = scope.matrix[start : start + count]
                try:
                    _fill_unit_rows(block, entry.vectors)
                except ValueError as exc:
                    raise ValueError(f"FAQ entry {entry.entry_id}: {exc}") from None
                scope.entries[entry.entry_id] = _Stored(
                    entry_id=entry.entry_id,
                    answer=entry.answer,
                    phrasings=tuple(entry.phrasings),
                    vectors=block,
                )
            scopes[name] = scope
        self._scopes = scopes
        self._scope_of = {entry_id: entry.scope for entry_id, entry in latest.items()}

    def upsert(self, entry: IndexedEntry) -> None:
        """Add or replace an entry (also moves it when its scope changed)."""
        _check(entry, self._dim)
        vectors = np.empty((len(entry.phrasings), self._dim), dtype=np.float32)
        _fill_unit_rows(vectors, entry.vectors)
        stored = _Stored(
            entry_id=entry.entry_id,
            answer=entry.answer,
            phrasings=tuple(entry.phrasings),
            vectors=vectors,
        )
        self.remove(entry.entry_id)
        scope = self._scopes.get(entry.scope)
        if scope is None:
            scope = self._scopes[entry.scope] = _Scope(self._dim)
        scope.entries[entry.entry_id] = stored
        scope.dirty = True
        self._scope_of[entry.entry_id] = entry.scope

    def remove(self, entry_id: int) -> bool:
        """Drop an entry (deleted or disabled); False when it was not indexed."""
        scope_name = self._scope_of.pop(entry_id, None)
        if scope_name is None:
            return False
        scope = self._scopes[scope_name]
        del scope.entries[entry_id]
        if scope.entries:
            scope.dirty = True
        else:
            del self._scopes[scope_name]
        return True

    def compact(self) -> None:
        """Rebuild stale scopes now (a search does this anyway)."""
        for scope in self._scopes.values():
            if scope.dirty:
                scope.build()

    # --- reads ----------------------------------------------------------------------------

    def search(
        self, *, query_vector: npt.ArrayLike, scopes: Sequence[str], top_k: int = 5
    ) -> list[Candidate]:
        """The `top_k` entries of the given scopes by their best phrasing, best first."""
        if top_k < 1:
            return []
        query = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        if query.shape != (self._dim,):
            raise ValueError(f"query vector has {query.size} values, expected {self._dim}")
        norm = float(np.linalg.norm(query))
        if norm == 0.0 or not np.isfinite(norm):
            return []
        query = query / norm
        found: list[Candidate] = []
        with _single_threaded_blas():
            for name in dict.fromkeys(scopes):
                scope = self._scopes.get(name)
                if scope is None:
                    continue
                if scope.dirty:
                    scope.build()
                found.extend(self._search_scope(scope, query, top_k))
        found.sort(key=lambda candidate: candidate.score, reverse=True)
        return found[:top_k]

    def search_phrasings(
        self, *, query_vector: npt.ArrayLike, scopes: Sequence[str], top_k: int = 5
    ) -> list[Candidate]:
        """Every phrasing of the `top_k` best entries, best first.

        The decider needs them all: a question may repeat, or the verifier accept, a phrasing
        of an entry other than the one that scores best.
        """
        best = self.search(query_vector=query_vector, scopes=scopes, top_k=top_k)
        if not best:
            return []
        query = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        query = query / float(np.linalg.norm(query))
        out: list[Candidate] = []
        for candidate in best:
            stored = self._scopes[self._scope_of[candidate.entry_id]].entries[candidate.entry_id]
            scores = stored.vectors @ query
            out.extend(
                Candidate(entry_id=stored.entry_id, phrasing=phrasing, score=float(score))
                for phrasing, score in zip(stored.phrasings, scores, strict=True)
            )
        out.sort(key=lambda candidate: candidate.score, reverse=True)
        return out

    @staticmethod
    def _search_scope(scope: _Scope, query: FloatMatrix, top_k: int) -> list[Candidate]:
        scores = scope.matrix @ query
        best = np.maximum.reduceat(scores, scope.starts)
        count = min(top_k, best.size)
        top = np.argpartition(-best, count - 1)[:count]
        stored = list(scope.entries.values())
        ends = np.append(scope.starts[1:], scores.size)
        out = []
        for position in top:
            item = stored[int(position)]
            start, end = int(scope.starts[position]), int(ends[position])
            row = int(np.argmax(scores[start:end]))
            out.append(
                Candidate(
                    entry_id=item.entry_id,
                    phrasing=item.phrasings[row],
                    score=float(best[position]),
                )
            )
        return out

    def answer(self, entry_id: int) -> str | None:
        scope = self._scope_of.get(entry_id)
        return None if scope is None else self._scopes[scope].entries[entry_id].answer

    def phrasings(self, entry_id: int) -> tuple[str, ...] | None:
        scope = self._scope_of.get(entry_id)
        return None if scope is None else self._scopes[scope].entries[entry_id].phrasings

    def scope_of(self, entry_id: int) -> str | None:
        return self._scope_of.get(entry_id)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._scope_of

    def __len__(self) -> int:
        return len(self._scope_of)

    @property
    def is_empty(self) -> bool:
        return not self._scope_of

    @property
    def scopes(self) -> list[str]:
        return sorted(self._scopes)

    @property
    def rows(self) -> int:
        """Phrasing vectors indexed (one per phrasing)."""
        return sum(
            len(item.phrasings)
            for scope in self._scopes.values()
            for item in scope.entries.values()
        )

    @property
    def nbytes(self) -> int:
        """Bytes of the numpy buffers the index keeps alive (vectors and row offsets).

        Counts each buffer once, including a stale matrix that stays alive until its scope is
        rebuilt (next search or `compact()`). Python objects (answers, phrasings) are not
        included; the bench reports the process RSS as well.
        """
        buffers: dict[int, int] = {}
        total = 0
        for scope in self._scopes.values():
            total += scope.starts.nbytes
            buffers[id(scope.matrix)] = scope.matrix.nbytes
            for item in scope.entries.values():
                base = item.vectors.base if item.vectors.base is not None else item.vectors
                if isinstance(base, np.ndarray):
                    buffers.setdefault(id(base), base.nbytes)
                else:
                    buffers.setdefault(id(item.vectors), item.vectors.nbytes)
        return total + sum(buffers.values())
