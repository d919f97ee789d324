"""The in-memory FAQ index: scopes, upsert/remove/replace, best phrasing, memory accounting."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from inference.faq.index import FaqIndex, IndexedEntry, template_scope

DIM = 8
REPO_ROOT = Path(__file__).resolve().parents[3]


def unit(*weights: tuple[int, float]) -> npt.NDArray[np.float32]:
    """A unit vector from (axis, weight) pairs."""
    vector = np.zeros(DIM, dtype=np.float32)
    for axis, weight in weights:
        vector[axis] = weight
    return vector / np.linalg.norm(vector)


def entry(
    entry_id: int, *axes: int, scope: str = "global", answer: str | None = None
) -> IndexedEntry:
    """One phrasing per axis; phrasing i points along axes[i]."""
    return IndexedEntry(
        entry_id=entry_id,
        scope=scope,
        answer=answer or f"answer {entry_id}",
        phrasings=[f"entry {entry_id} phrasing {axis}" for axis in axes],
        vectors=np.stack([unit((axis, 1.0)) for axis in axes]),
    )


def test_search_returns_best_phrasing_per_entry_best_first() -> None:
    index = FaqIndex(dim=DIM)
    index.replace_all([entry(1, 0, 1), entry(2, 2, 3), entry(3, 4)])
    query = unit((1, 0.8), (3, 0.6))
    found = index.search(query_vector=query, scopes=["global"])
    assert [c.entry_id for c in found] == [1, 2, 3]
    assert found[0].phrasing == "entry 1 phrasing 1"
    assert found[0].score == pytest.approx(0.8, abs=1e-6)
    assert found[1].phrasing == "entry 2 phrasing 3"
    assert found[1].score == pytest.approx(0.6, abs=1e-6)
    assert found[2].score == pytest.approx(0.0, abs=1e-6)


def test_search_phrasings_offers_every_phrasing_of_the_best_entries() -> None:
    # a question may repeat, or the verifier accept, a phrasing other than an entry's best
    index = FaqIndex(dim=DIM)
    index.replace_all([entry(1, 0, 1), entry(2, 2, 3), entry(3, 4)])
    query = unit((1, 0.8), (0, 0.5), (3, 0.3))
    found = index.search_phrasings(query_vector=query, scopes=["global"], top_k=2)
    assert [(c.entry_id, c.phrasing) for c in found] == [
        (1, "entry 1 phrasing 1"),
        (1, "entry 1 phrasing 0"),
        (2, "entry 2 phrasing 3"),
        (2, "entry 2 phrasing 2"),
    ]
    assert [c.score for c in found] == sorted((c.score for c in found), reverse=True)
    assert index.search_phrasings(query_vector=np.zeros(DIM), scopes=["global"]) == []


def test_top_k_limits_and_merges_scopes() -> None:
    index = FaqIndex(dim=DIM)
    index.replace_all([entry(1, 0), entry(2, 1, scope=template_scope(7)), entry(3, 2), entry(4, 3)])
    query = unit((0, 0.2), (1, 0.9), (2, 0.3))
    found = index.search(query_vector=query, scopes=["global", "template:7"], top_k=2)
    assert [c.entry_id for c in found] == [2, 3]
    assert index.search(query_vector=query, scopes=["global"], top_k=0) == []


def test_scopes_are_respected() -> None:
    index = FaqIndex(dim=DIM)
    index.replace_all([entry(1, 0), entry(2, 0, scope="template:5")])
    query = unit((0, 1.0))
    assert [c.entry_id for c in index.search(query_vector=query, scopes=["global"])] == [1]
    assert [c.entry_id for c in index.search(query_vector=query, scopes=["template:5"])] == [2]
    assert index.search(query_vector=query, scopes=["template:6"]) == []
    both = index.search(query_vector=query, scopes=["template:5", "global", "global"])
    assert sorted(c.entry_id for c in both) == [1, 2]


def test_upsert_replaces_and_moves_between_scopes() -> None:
    index = FaqIndex(dim=DIM)
    index.upsert(entry(1, 0, answer="old"))
    index.upsert(entry(1, 5, scope="template:3", answer="new"))
    assert len(index) == 1
    assert index.answer(1) == "new"
    assert index.scope_of(1) == "template:3"
    assert index.phrasings(1) == ("entry 1 phrasing 5",)
    assert index.search(query_vector=unit((0, 1.0)), scopes=["global"]) == []
    found = index.search(query_vector=unit((5, 1.0)), scopes=["template:3"])
    assert [(c.entry_id, c.phrasing) for c in found] == [(1, "entry 1 phrasing 5")]
    assert index.scopes == ["template:3"]


def test_removed_and_disabled_entries_are_absent() -> None:
    index = FaqIndex(dim=DIM)
    index.replace_all([entry(1, 0), entry(2, 0), entry(3, 1)])
    # the web side removes an entry from every worker when it is deleted or disabled
    assert index.remove(2)
    assert not index.remove(2)
    assert 2 not in index
    assert index.answer(2) is None
    found = index.search(query_vector=unit((0, 1.0)), scopes=["global"])
    assert [c.entry_id for c in found if c.score > 0.5] == [1]
    # a later snapshot (enabled entries only) replaces everything
    index.replace_all([entry(3, 1)])
    assert len(index) == 1
    assert index.answer(1) is None
    assert [c.entry_id for c in index.search(query_vector=unit((0, 1.0)), scopes=["global"])] == [3]


def test_removing_the_last_entry_empties_the_index() -> None:
    index = FaqIndex(dim=DIM)
    assert index.is_empty
    index.upsert(entry(1, 0))
    assert not index.is_empty
    index.remove(1)
    assert index.is_empty
    assert index.scopes == []
    assert index.nbytes == 0
    assert index.search(query_vector=unit((0, 1.0)), scopes=["global"]) == []


def test_vectors_are_copied_and_normalised() -> None:
    index = FaqIndex(dim=DIM)
    vectors = np.zeros((1, DIM), dtype=np.float64)
    vectors[0, 0] = 3.0  # not unit length, not float32
    index.upsert(
        IndexedEntry(entry_id=1, scope="global", answer="a", phrasings=["q"], vectors=vectors)
    )
    vectors[0, 0] = -3.0  # the caller's buffer is not the index's
    (found,) = index.search(query_vector=unit((0, 1.0)) * 5, scopes=["global"])
    assert found.score == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("scope", "vectors", "message"),
    [
        ("global", np.ones((2, DIM), dtype=np.float32), "shape"),
        ("global", np.ones((1, DIM + 1), dtype=np.float32), "shape"),
        ("global", np.zeros((1, DIM), dtype=np.float32), "all zeros"),
        ("global", np.full((1, DIM), np.nan, dtype=np.float32), "NaN"),
        ("templates:1", np.ones((1, DIM), dtype=np.float32), "scope"),
        ("template:abc", np.ones((1, DIM), dtype=np.float32), "scope"),
    ],
)
def test_invalid_entries_are_rejected(
    scope: str, vectors: npt.NDArray[np.float32], message: str
) -> None:
    index = FaqIndex(dim=DIM)
    with pytest.raises(ValueError, match=message):
        index.upsert(
            IndexedEntry(entry_id=1, scope=scope, answer="a", phrasings=["q"], vectors=vectors)
        )
    assert index.is_empty


def test_query_vector_of_the_wrong_size_is_rejected() -> None:
    index = FaqIndex(dim=DIM)
    index.upsert(entry(1, 0))
    with pytest.raises(ValueError, match="expected 8"):
        index.search(query_vector=np.ones(DIM + 1, dtype=np.float32), scopes=["global"])
    assert index.search(query_vector=np.zeros(DIM, dtype=np.float32), scopes=["global"]) == []
    # a (1, dim) row from `Embedder.encode([q])` works as well
    assert index.search(query_vector=unit((0, 1.0)).reshape(1, DIM), scopes=["global"])


def test_memory_is_the_vectors_once() -> None:
    index = FaqIndex(dim=DIM)
    index.replace_all([entry(i, 0, 1, 2) for i in range(1, 101)])
    assert index.rows == 300
    vector_bytes = 300 * DIM * 4
    offsets = 100 * np.dtype(np.intp).itemsize
    assert index.nbytes == vector_bytes + offsets


def test_removed_rows_are_freed_after_rebuild() -> None:
    index = FaqIndex(dim=DIM)
    index.replace_all([entry(i, 0, 1) for i in range(1, 11)])
    old_matrix = weakref.ref(index._scopes["global"].matrix)
    for entry_id in range(1, 6):
        index.remove(entry_id)
    index.upsert(entry(3, 4))  # an update is a remove + add
    # until the next search/compact the old matrix is still alive, and counted
    assert index.nbytes >= 20 * DIM * 4
    index.search(query_vector=unit((4, 1.0)), scopes=["global"])
    gc.collect()
    assert old_matrix() is None
    assert index.rows == 11
    assert index.nbytes == 11 * DIM * 4 + 6 * np.dtype(np.intp).itemsize


def test_many_updates_do_not_grow_memory() -> None:
    index = FaqIndex(dim=DIM)
    index.replace_all([entry(i, i % DIM) for i in range(1, 51)])
    baseline = index.nbytes
    for round_ in range(20):
        for entry_id in range(1, 51):
            index.upsert(entry(entry_id, (entry_id + round_) % DIM))
        index.compact()
        assert index.nbytes == baseline


def test_importing_the_faq_package_does_not_load_torch() -> None:
    code = (
        "import sys\n"
        "import inference.faq.embedder, inference.faq.index, inference.faq.candidates\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers') "
        "if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO_ROOT, timeout=60)


def test_a_bad_snapshot_changes_nothing() -> None:
    index = FaqIndex(dim=DIM)
    index.replace_all([entry(1, 0)])
    bad = IndexedEntry(
        entry_id=3, scope="global", answer="a", phrasings=["q"], vectors=np.zeros((1, DIM))
    )
    with pytest.raises(ValueError, match="entry 3: a vector is all zeros"):
        index.replace_all([entry(2, 1), bad])
    assert [e for e in (1, 2, 3) if e in index] == [1]
    assert index.search(query_vector=unit((0, 1.0)), scopes=["global"])[0].entry_id == 1


def test_a_snapshot_with_a_repeated_id_keeps_the_last() -> None:
    index = FaqIndex(dim=DIM)
    index.replace_all([entry(1, 0, answer="first"), entry(1, 1, scope="template:2", answer="last")])
    assert len(index) == 1
    assert index.answer(1) == "last"
    assert index.scopes == ["template:2"]
    assert index.rows == 1
