"""FAQ entries without the embedding model: a deterministic stand-in embedder (the same text,
the same vector, so a question asked verbatim is an exact FAQ hit) and entries saved with its
vectors already computed."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from chatapp.faq.models import FaqEntry
from inference.faq.embedder import DIMENSIONS

QUESTION = "How do I reset my password?"
ANSWER = "Go to Settings > Security and choose 'Reset password'."


class StandInEmbedder:
    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
            row = np.random.default_rng(seed).standard_normal(DIMENSIONS).astype(np.float32)
            rows.append(row / np.linalg.norm(row))
        return np.stack(rows)


def entry_create(**fields: Any) -> FaqEntry:
    """An entry with its vectors already computed (what Celery's embed task leaves)."""
    values: dict[str, Any] = {"question": QUESTION, "answer": ANSWER}
    values.update(fields)
    entry = FaqEntry(**values)
    phrasings = entry.phrasings
    entry.vectors = StandInEmbedder().encode(phrasings).tobytes()
    entry.embedded_phrasings = phrasings
    entry.save()
    return entry
