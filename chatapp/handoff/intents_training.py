"""Training the two handoff questions of `intents.py` with scikit-learn, and saving each as
plain numbers the web process scores with (no scikit-learn there).

    python -m chatapp.handoff.intents_training DIRECTORY

trains every question whose model file is missing in DIRECTORY (the web process runs this in
a child process, `intents.warm`). Each model: word (1-2) and char_wb (2-5) n-gram TF-IDF
(sublinear tf) into a balanced logistic regression, fitted on the `train` split; its
threshold is the lowest (at least 0.5) whose cross-validated guesses on the train split reach
MIN_PRECISION (a customer wrongly put in line waits for nobody; a wrong offer is noise under
a good answer). The `test` split is never read here.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from chatapp.handoff.intents import ANALYZERS, QUESTIONS, Labelled, Model, Question

if TYPE_CHECKING:
    from sklearn.pipeline import Pipeline

MIN_PRECISION = 0.95


def pipeline() -> Pipeline:
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


def fitted(
    question: Question, examples: list[Labelled], *, min_precision: float = MIN_PRECISION
) -> tuple[Pipeline, dict[str, Any]]:
    """The fitted pipeline and what `intents.Model` reads of it."""
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    texts = [question.excerpt(e.text) or e.text for e in examples]
    truth = np.array([e.positive for e in examples])
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
    scores = cross_val_predict(pipeline(), texts, truth, cv=folds, method="predict_proba")[:, 1]
    threshold = threshold_for(scores, truth, min_precision=min_precision)
    fit = pipeline().fit(texts, truth)
    return fit, saved_form(fit, threshold)


def saved_form(fit: Pipeline, threshold: float) -> dict[str, Any]:
    union, regression = fit.named_steps["features"], fit.named_steps["model"]
    coef = regression.coef_[0]
    blocks, offset = [], 0
    for name, vectorizer in union.transformer_list:
        assert name in ANALYZERS
        vocabulary: dict[str, int] = vectorizer.vocabulary_
        terms = {
            t: [float(vectorizer.idf_[i]), float(coef[offset + i])] for t, i in vocabulary.items()
        }
        blocks.append({"analyzer": name, "terms": terms})
        offset += len(vocabulary)
    return {"threshold": threshold, "intercept": float(regression.intercept_[0]), "blocks": blocks}


def trained(question: Question) -> Model:
    """The model the product uses, trained here (tests, the bench)."""
    return Model(question, fitted(question, question.labelled("train"))[1])


def train_missing(directory: Path) -> None:
    """Train the models missing in `directory`: one process at a time (the web processes of
    one machine start together), the others then find them there."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".training.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _train_missing(directory)


def _train_missing(directory: Path) -> None:
    for question in QUESTIONS:
        path = question.model_file(directory)
        if path.exists():
            continue
        _, saved = fitted(question, question.labelled("train"))
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(saved), encoding="utf-8")
        partial.replace(path)  # whole or absent: a reader never sees half a file


if __name__ == "__main__":
    train_missing(Path(sys.argv[1]))
