"""Two questions about words, answered by small learned models (not lists of phrases):

- `PERSON_ASKED`: does a customer's message ask for a person of the team ("I want a human",
  "agent pls", "can I speak to someone")?
- `CANNOT_HELP`: does an answer of the assistant say it cannot help ("I'm sorry, I don't have
  access to your order", "I don't know")? Then the page offers a person.

Each is word and character n-grams (TF-IDF, so "hunam" and "humans" still count) into a
logistic regression, trained on labelled texts in `data/<name>.jsonl`, hard cases included
(messages naming a person without asking for one: "the delivery person left it at the wrong
door"; answers that apologise and help: "I'm sorry to hear that! Here is what you can do").

Only a file's `train` split trains a model and sets its threshold; its `test` split is held
out for `python -m bench.intents`, which reports how the shipped models do on texts they never
saw. The threshold asks for high precision (cross-validated on the train split): a customer
wrongly put in line waits for nobody, and a wrong offer is noise under a good answer.

Training takes under a second; the first socket warms both in a thread (`warm`), so no message
waits for it and nothing of it sits on the path to Ready.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    from sklearn.pipeline import Pipeline

DATA = Path(__file__).with_name("data")
# What a threshold asks of the train split's cross-validated guesses.
MIN_PRECISION = 0.95

Split = Literal["train", "test"]


@dataclass(frozen=True, slots=True)
class Labelled:
    text: str
    positive: bool
    split: Split


@dataclass(frozen=True, slots=True)
class Question:
    """One yes/no question about a text, and the labelled texts that teach it."""

    name: str  # data/<name>.jsonl
    # what the model reads: a text past `max_chars` is not asked (`head` False: a long
    # message is a question with details) or only its beginning is (`head` True: an answer
    # says it cannot help in its first sentences)
    max_chars: int
    head: bool

    def excerpt(self, text: str) -> str | None:
        text = text.strip()
        if not text:
            return None
        if len(text) > self.max_chars:
            return text[: self.max_chars] if self.head else None
        return text

    def labelled(self, split: Split | None = None) -> list[Labelled]:
        lines = (DATA / f"{self.name}.jsonl").read_text(encoding="utf-8").splitlines()
        rows = [json.loads(line) for line in lines if line]
        return [
            Labelled(text=r["text"], positive=bool(r["positive"]), split=r["split"])
            for r in rows
            if split is None or r["split"] == split
        ]


PERSON_ASKED = Question("person_requests", max_chars=300, head=False)
CANNOT_HELP = Question("answers_cannot_help", max_chars=300, head=True)


class Model:
    def __init__(self, question: Question, pipeline: Pipeline, threshold: float) -> None:
        self.question = question
        self._pipeline = pipeline
        self.threshold = threshold

    def probability(self, text: str) -> float:
        return float(self._pipeline.predict_proba([text])[0][1])

    def says(self, text: str) -> bool:
        excerpt = self.question.excerpt(text)
        return excerpt is not None and self.probability(excerpt) >= self.threshold


def _pipeline() -> Pipeline:
    # imported here: scikit-learn takes a second to import, kept off the web's path to Ready
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import FeatureUnion, Pipeline

    features = FeatureUnion(
        [
            ("words", TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)),
            ("chars", TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True)),
        ]
    )
    model = LogisticRegression(C=10.0, class_weight="balanced", max_iter=2000)
    return Pipeline([("features", features), ("model", model)])


def threshold_for(scores: np.ndarray, truth: np.ndarray, *, min_precision: float) -> float:
    """The lowest score threshold (at least 0.5) whose guesses reach `min_precision`: the
    most texts caught without more than that share of wrong ones. Pure: unit-tested."""
    for threshold in sorted({0.5, *(float(s) for s in scores if s >= 0.5)}):
        chosen = scores >= threshold
        if not chosen.any():
            break
        if float(truth[chosen].mean()) >= min_precision:
            return threshold
    return 1.0  # nothing reaches it: never say yes


def trained(
    question: Question, examples: list[Labelled], *, min_precision: float = MIN_PRECISION
) -> Model:
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    texts = [question.excerpt(e.text) or e.text for e in examples]
    truth = np.array([e.positive for e in examples])
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
    scores = cross_val_predict(_pipeline(), texts, truth, cv=folds, method="predict_proba")[:, 1]
    threshold = threshold_for(scores, truth, min_precision=min_precision)
    return Model(question, _pipeline().fit(texts, truth), threshold)


@cache
def shared(question: Question) -> Model:
    """The model the product uses: trained once per process, on the train split only."""
    return trained(question, question.labelled("train"))


def asks_for_person(text: str) -> bool:
    return shared(PERSON_ASKED).says(text)


def cannot_help(answer: str) -> bool:
    return shared(CANNOT_HELP).says(answer)


_warming = threading.Lock()


def warm() -> None:
    """Train the shared models in a thread, once (a socket connects: its first message
    should not wait for the training)."""
    if shared.cache_info().currsize >= 2 or not _warming.acquire(blocking=False):
        return
    threading.Thread(target=_warm, name="intents-warm", daemon=True).start()


def _warm() -> None:
    try:
        shared(PERSON_ASKED)
        shared(CANNOT_HELP)
    finally:
        _warming.release()
