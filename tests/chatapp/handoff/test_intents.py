"""Handoff's two word questions: the threshold rule, what the models read, their data, that
the web's plain scorer gives scikit-learn's own probability, that the models tell clear cases
apart (the held-out numbers are `python -m bench.intents`'s), and that the web process loads
them, training them first in a child process."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from chatapp.handoff import intents, intents_training
from chatapp.handoff.intents import CANNOT_HELP, PERSON_ASKED, Question
from chatapp.handoff.intents_training import threshold_for


def test_the_threshold_is_the_lowest_that_reaches_the_precision() -> None:
    scores = np.array([0.95, 0.9, 0.8, 0.7, 0.6, 0.3])
    truth = np.array([True, True, True, False, True, False])
    # at 0.6 four of five guesses are right (0.8); from 0.8 on, all are
    assert threshold_for(scores, truth, min_precision=0.95) == 0.8
    assert threshold_for(scores, truth, min_precision=0.8) == 0.5
    # never below 0.5, and 1.0 (never yes) when nothing is precise enough
    assert threshold_for(np.array([0.9, 0.4]), np.array([False, True]), min_precision=0.9) == 1.0


def test_a_long_message_is_not_asked_but_a_long_answer_is_read_from_its_start() -> None:
    assert PERSON_ASKED.excerpt("x" * 301) is None
    assert PERSON_ASKED.excerpt("  agent please ") == "agent please"
    long_answer = "I can't see it. " + "x" * 400
    assert CANNOT_HELP.excerpt(long_answer) == long_answer[:300]
    assert Question("q", max_chars=10, head=True).excerpt("   ") is None


@pytest.mark.parametrize("question", [PERSON_ASKED, CANNOT_HELP])
def test_each_data_file_has_both_labels_in_both_splits_and_no_text_twice(
    question: Question,
) -> None:
    rows = question.labelled()
    assert {(r.split, r.positive) for r in rows} == set(
        itertools.product(("train", "test"), (True, False))
    )
    texts = [r.text.lower() for r in rows]
    assert len(texts) == len(set(texts))
    assert len(question.labelled("train")) > 2 * len(question.labelled("test"))


@pytest.mark.parametrize("question", [PERSON_ASKED, CANNOT_HELP])
def test_the_web_scorer_reads_the_same_ngrams_and_gives_the_pipelines_probability(
    question: Question,
) -> None:
    fit, saved = intents_training.fitted(question, question.labelled("train"))
    model = intents.Model(question, saved)
    texts = [e.text for e in question.labelled()] + ["", "  Ça   va?\tOK  ", "a b"]
    for name, vectorizer in fit.named_steps["features"].transformer_list:
        analyze = vectorizer.build_analyzer()
        for text in texts:
            assert sorted(intents.ANALYZERS[name](text)) == sorted(analyze(text)), text
    for text in texts:
        expected = float(fit.predict_proba([text])[0][1])
        assert model.probability(text) == pytest.approx(expected, abs=1e-9)


def test_asking_for_a_person_is_told_from_naming_one() -> None:
    model = intents_training.trained(PERSON_ASKED)
    for asking in ("I want to speak to a human", "get me a real person", "agent pls"):
        assert model.says(asking), asking
    for naming in (
        "the delivery person was rude",
        "how many agents can my team have?",
        "what are your opening hours?",
    ):
        assert not model.says(naming), naming


def test_an_answer_that_cannot_help_is_told_from_one_that_apologises_and_helps() -> None:
    model = intents_training.trained(CANNOT_HELP)
    assert model.says("I'm sorry, I don't have access to your account details.")
    assert model.says("I don't know the answer to that.")
    assert not model.says(
        "I'm sorry to hear that! You can return it within 30 days from your orders page."
    )
    assert not model.says("We ship to Canada in 7-10 working days.")


def test_the_web_process_trains_missing_models_in_a_child_then_loads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(intents, "_models", {})
    assert not intents.asks_for_person("I want a human")  # not loaded yet: no
    thread = intents.warm(tmp_path)
    assert thread is not None
    assert intents.warm(tmp_path) is None  # already warming: not twice
    thread.join(timeout=120)
    assert sorted(p.name.split("-v")[0] for p in tmp_path.glob("*.json")) == [
        "answers_cannot_help",
        "person_requests",
    ]
    assert intents.asks_for_person("I want a human")
    assert intents.cannot_help("I'm sorry, I don't know.")
    assert intents.warm(tmp_path) is None  # loaded: nothing to do
