"""Does a user's question ask what an FAQ entry's question asks? A learned pair classifier.

A cross-encoder (MiniLM-L6 reading both questions at once, with a one-logit head) fine-tuned
at prepare time on `labelled_pairs.jsonl` (`verifier_training.py`). It sees both questions
together, so it can learn what the bi-encoder's cosine is blind to: "to" against "from", a
"not", another amount, another plan. Its folder holds the weights, the tokenizer and
`verifier.json`: the threshold chosen on the tune split and how it was trained.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_LENGTH = 64  # tokens of both questions together; FAQ questions are short
METADATA = "verifier.json"


@dataclass(frozen=True, slots=True)
class VerifierInfo:
    threshold: float  # a pair with a probability at or above it asks the same thing
    cosine_floor: float  # ... if its embedding cosine is at least this (both from tune)
    seed: int
    train_pairs: int
    train_s: float
    pairs_sha256: str  # of the labelled pairs it was trained on

    @classmethod
    def read(cls, model_dir: Path) -> VerifierInfo:
        raw = json.loads((model_dir / METADATA).read_text(encoding="utf-8"))
        return cls(**raw)


class FaqVerifier:
    """Scores (entry question, user question) pairs; loads lazily, once, thread-safe."""

    def __init__(self, *, model_dir: Path) -> None:
        self.model_dir = model_dir
        self.info = VerifierInfo.read(model_dir)
        self._lock = threading.Lock()
        self._model: Any = None
        self._tokenizer: Any = None

    def load(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            os.environ["HF_HUB_OFFLINE"] = "1"
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(str(self.model_dir))
            model = AutoModelForSequenceClassification.from_pretrained(str(self.model_dir))
            self._model = model.eval()

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """P(same question) for each (entry question, user question)."""
        if not pairs:
            return []
        self.load()
        import torch

        encoded = self._tokenizer(
            [a for a, _ in pairs],
            [b for _, b in pairs],
            padding=True,
            truncation=True,
            max_length=MAX_LENGTH,
            return_tensors="pt",
        )
        with torch.inference_mode():
            logits = self._model(**encoded).logits.squeeze(-1)
        return [float(p) for p in torch.sigmoid(logits).reshape(-1)]

    def accepts(self, *, cosine: float, probability: float) -> bool:
        return cosine >= self.info.cosine_floor and probability >= self.info.threshold
