"""Does a user's question ask what an FAQ entry's question asks? A learned pair classifier.

A small head over the frozen sentence model's token vectors (`pair_model.py`: it lines up the
words of both questions), trained at prepare time on labelled pairs and whole FAQs
(`verifier_training.py`). It compares the questions word by word, so it can learn what the
bi-encoder's cosine is blind to: "to" against "from", a "not", another amount, another plan,
a sibling entry of the same FAQ. Its folder holds the head's weights (the encoder is the
packaged model) and `verifier.json`: the decision's rule (cosine floor, threshold and margin
over the runner-up, chosen on the tune pairs and FAQ sets: `entry_choice.py`), what it gave
there, and how it was trained.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from inference.faq.entry_choice import ChoiceRule
from inference.faq.lazy_model import LazyModel

METADATA = "verifier.json"


@dataclass(frozen=True, slots=True)
class VerifierInfo:
    threshold: float  # a pair with a probability at or above it asks the same thing
    cosine_floor: float  # ... if its embedding cosine is at least this (both from tune)
    margin: float  # log-odds the best entry must lead the runner-up by (tune FAQ sets)
    suggest_at: float  # entries this probable are offered when nothing answers
    false_hit_bound: float  # the tune false-hit rate's 95% upper bound they were held to
    tune_recall: float  # what they gave on the tune split
    tune_false_hits: int
    tune_near_misses: int
    tune_sets_recall: float  # the whole rule on the tune FAQ sets (`labelled_sets.py`)
    tune_sets_wrong_entry: int
    tune_sets_false_hits: int
    seed: int
    train_pairs: int
    train_sets: int  # whole FAQs whose sibling entries were negatives
    train_examples: int
    epochs_run: int
    train_s: float
    pairs_sha256: str  # of the labelled pairs it was trained on

    @classmethod
    def read(cls, model_dir: Path) -> VerifierInfo:
        raw = json.loads((model_dir / METADATA).read_text(encoding="utf-8"))
        return cls(**raw)

    def rule(self) -> ChoiceRule:
        return ChoiceRule(
            threshold=self.threshold,
            margin=self.margin,
            cosine_floor=self.cosine_floor,
            suggest_at=self.suggest_at,
        )

    def write(self, model_dir: Path) -> None:
        (model_dir / METADATA).write_text(json.dumps(asdict(self), indent=1), encoding="utf-8")


class FaqVerifier(LazyModel[Any]):
    """Scores (entry question, user question) pairs; loads lazily, once, thread-safe."""

    def __init__(self, *, model_dir: Path) -> None:
        super().__init__()
        self.model_dir = model_dir
        self.info = VerifierInfo.read(model_dir)

    def _load_model(self) -> Any:
        from inference.faq.embedder import packaged_model_path
        from inference.faq.pair_model import PairModel

        return PairModel.load(self.model_dir, base=packaged_model_path())

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """P(same question) for each (entry question, user question); an entry's vectors are
        read once and kept, so a question costs one MiniLM pass plus the head (~ms)."""
        if not pairs:
            return []
        probabilities: list[float] = self._loaded_model().probabilities(pairs)
        return probabilities
