"""The two word questions of handoff: the threshold rule, what the models read, their data,
and that the shipped models tell clear cases apart (the held-out numbers are
`python -m bench.intents`'s)."""

from __future__ import annotations

import numpy as np
import pytest

from chatapp.handoff import intents
from chatapp.handoff.intents import CANNOT_HELP, PERSON_ASKED, Question, threshold_for


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
    assert (
        CANNOT_HELP.excerpt("I can't see it. " + "x" * 400)
        == ("I can't see it. " + "x" * 400)[:300]
    )
    assert Question("q", max_chars=10, head=True).excerpt("   ") is None


@pytest.mark.parametrize("question", [PERSON_ASKED, CANNOT_HELP])
def test_each_data_file_has_both_labels_in_both_splits_and_no_text_twice(
    question: Question,
) -> None:
    rows = question.labelled()
    assert {(r.split, r.positive) for r in rows} == {
        ("train", True),
        ("train", False),
        ("test", True),
        ("test", False),
    }
    texts = [r.text.lower() for r in rows]
    assert len(texts) == len(set(texts))
    assert len(question.labelled("train")) > 2 * len(question.labelled("test"))


def test_asking_for_a_person_is_told_from_naming_one() -> None:
    for asking in ("I want to speak to a human", "get me a real person", "agent pls"):
        assert intents.asks_for_person(asking), asking
    for naming in (
        "the delivery person was rude",
        "how many agents can my team have?",
        "what are your opening hours?",
    ):
        assert not intents.asks_for_person(naming), naming


def test_an_answer_that_cannot_help_is_told_from_one_that_apologises_and_helps() -> None:
    assert intents.cannot_help("I'm sorry, I don't have access to your account details.")
    assert intents.cannot_help("I don't know the answer to that.")
    assert not intents.cannot_help(
        "I'm sorry to hear that! You can return it within 30 days from your orders page."
    )
    assert not intents.cannot_help("We ship to Canada in 7-10 working days.")


def test_warming_trains_both_models_once() -> None:
    intents.warm()
    intents.warm()  # a second socket while the first still trains: no second training
    assert intents.shared(PERSON_ASKED) is intents.shared(PERSON_ASKED)
    assert intents.shared.cache_info().currsize >= 2
