"""Two questions about words, answered by small learned models (not lists of phrases):

- `PERSON_ASKED`: does a customer's message ask for a person of the team ("I want a human",
  "agent pls", "can I speak to someone")?
- `CANNOT_HELP`: does an answer of the assistant say it cannot help ("I'm sorry, I don't have
  access to your order", "I don't know")? Then the page offers a person.

Each is word and character n-grams (TF-IDF, so "hunam" and "humans" still count) into a
logistic regression, taught by labelled texts in `data/<name>.jsonl`, hard cases included
(messages naming a person without asking for one: "the delivery person left it at the wrong
door"; answers that apologise and help: "I'm sorry to hear that! Here is what you can do").
`intents_training.py` trains them with scikit-learn on each file's `train` split (its `test`
split is held out for `python -m bench.intents`) and writes each as plain numbers (every
n-gram's idf and weight, the threshold) to `<data dir>/intents/`, once per data file.

This module only reads those files and scores with plain dicts: no scikit-learn in the web
process (its import alone is a second of CPU), a few hundredths of a ms a decision, the same
probability as the pipeline's (tested). The training runs in a child process started in a
thread when the web process starts (`warm`): no web request waits for it or shares the
interpreter with it, and nothing of it is on the path to Ready. Until the models are loaded,
both questions answer no (the button still asks for a person).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

logger = logging.getLogger(__name__)

DATA = Path(__file__).with_name("data")
# The model files' format: part of their names, so a change retrains.
FORMAT = 1

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

    @property
    def data(self) -> Path:
        return DATA / f"{self.name}.jsonl"

    def labelled(self, split: Split | None = None) -> list[Labelled]:
        lines = self.data.read_text(encoding="utf-8").splitlines()
        rows = [json.loads(line) for line in lines if line]
        return [
            Labelled(text=r["text"], positive=bool(r["positive"]), split=r["split"])
            for r in rows
            if split is None or r["split"] == split
        ]

    def model_file(self, directory: Path) -> Path:
        """Where its trained model is kept: named by its data, so new data retrains."""
        digest = hashlib.sha256(self.data.read_bytes()).hexdigest()[:16]
        return directory / f"{self.name}-v{FORMAT}-{digest}.json"


PERSON_ASKED = Question("person_requests", max_chars=300, head=False)
CANNOT_HELP = Question("answers_cannot_help", max_chars=300, head=True)
QUESTIONS = (PERSON_ASKED, CANNOT_HELP)

# scikit-learn's analyzers, as the training configures them (tested equal on every text)
_WORD = re.compile(r"(?u)\b\w\w+\b")
_WHITE_SPACES = re.compile(r"\s\s+")


def word_ngrams(text: str) -> list[str]:
    """TfidfVectorizer(ngram_range=(1, 2)): lowercased words of 2+ characters, and pairs."""
    words = _WORD.findall(text.lower())
    return words + [f"{a} {b}" for a, b in itertools.pairwise(words)]


def char_wb_ngrams(text: str, low: int = 2, high: int = 5) -> list[str]:
    """TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5)): n-grams inside each word,
    padded with a space each side; a word shorter than n counted once."""
    grams: list[str] = []
    for word in _WHITE_SPACES.sub(" ", text.lower()).split():
        padded = f" {word} "
        for n in range(low, high + 1):
            if len(padded) <= n:
                grams.append(padded)
                break
            grams.extend(padded[i : i + n] for i in range(len(padded) - n + 1))
    return grams


ANALYZERS: dict[str, Callable[[str], list[str]]] = {"words": word_ngrams, "chars": char_wb_ngrams}


@dataclass(frozen=True, slots=True)
class _Block:
    """One TF-IDF block of the features: each known n-gram's idf and its weight in the
    regression. Plain str -> float dicts: nothing in them for the garbage collector to walk
    (a dict of tuples made the first full collection after loading pause a web process
    ~100 ms, bench.handoff)."""

    analyze: Callable[[str], list[str]]
    idf: dict[str, float]
    weight: dict[str, float]

    def score(self, text: str) -> float:
        """This block's part of coef . x: sublinear tf times idf, l2-normalised."""
        counts = Counter(t for t in self.analyze(text) if t in self.idf)
        values = {t: (1.0 + math.log(n)) * self.idf[t] for t, n in counts.items()}
        norm = math.sqrt(sum(v * v for v in values.values()))
        return sum(v * self.weight[t] for t, v in values.items()) / norm if norm else 0.0


class Model:
    def __init__(self, question: Question, saved: dict[str, Any]) -> None:
        self.question = question
        self.threshold = float(saved["threshold"])
        self._intercept = float(saved["intercept"])
        self._blocks = tuple(
            _Block(
                ANALYZERS[b["analyzer"]],
                idf={t: float(i) for t, (i, _) in b["terms"].items()},
                weight={t: float(w) for t, (_, w) in b["terms"].items()},
            )
            for b in saved["blocks"]
        )

    def probability(self, text: str) -> float:
        z = self._intercept + sum(block.score(text) for block in self._blocks)
        return 1.0 / (1.0 + math.exp(-z))

    def says(self, text: str) -> bool:
        excerpt = self.question.excerpt(text)
        return excerpt is not None and self.probability(excerpt) >= self.threshold


_models: dict[Question, Model] = {}
_warming = threading.Lock()  # one warming thread at a time


def ready(question: Question) -> bool:
    return question in _models


def asks_for_person(text: str) -> bool:
    """No until the model is loaded."""
    model = _models.get(PERSON_ASKED)
    return model is not None and model.says(text)


def cannot_help(answer: str) -> bool:
    """No until the model is loaded."""
    model = _models.get(CANNOT_HELP)
    return model is not None and model.says(answer)


def load(directory: Path) -> bool:
    """Load every model trained into `directory`; True when all are there."""
    for question in QUESTIONS:
        path = question.model_file(directory)
        if question not in _models and path.exists():
            _models[question] = Model(question, json.loads(path.read_text(encoding="utf-8")))
    return all(ready(q) for q in QUESTIONS)


def warm(directory: Path) -> threading.Thread | None:
    """Load the models from `directory` in a thread, training them there first in a child
    process when they are missing (once per data file); None when loaded or loading."""
    if all(ready(q) for q in QUESTIONS) or not _warming.acquire(blocking=False):
        return None
    thread = threading.Thread(target=_warm, args=(directory,), name="intents", daemon=True)
    thread.start()
    return thread


def _warm(directory: Path) -> None:
    try:
        if not load(directory):
            trained = subprocess.run(
                [sys.executable, "-m", "chatapp.handoff.intents_training", str(directory)],
                capture_output=True,
                text=True,
                timeout=600,
            )
            if trained.returncode != 0:
                logger.error("training the handoff intents failed: %s", trained.stderr[-2000:])
                return
            load(directory)
    except Exception:  # the questions answer no: the button still works
        logger.exception("could not load the handoff intents from %s", directory)
    finally:
        _warming.release()
