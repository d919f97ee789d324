"""What the verifier learns from: made-up near misses and all the entries of one FAQ at once."""

from __future__ import annotations

import random
from dataclasses import replace

from modelprep.labelled_pairs import LabelledPair
from modelprep.labelled_sets import LabelledSet, SetEntry, SetQuestion
from modelprep.verifier_examples import asked_of, contrasts, pair_examples, set_steps


def test_made_up_near_misses_differ_by_one_swap_or_number() -> None:
    swaps = [("to", "from"), ("account", "order")]
    assert contrasts("Do you ship to Canada?", swaps) == ["Do you ship from Canada?"]
    assert contrasts("Delete my order", swaps) == ["Delete my account"]
    assert contrasts("A 30 day return", swaps) == ["A 61 day return"]
    assert contrasts("What are your opening hours?", swaps) == []


def test_pairs_teach_repeats_and_swapped_near_misses() -> None:
    train = [
        LabelledPair(
            a="Do you ship to Canada?",
            b="can you deliver to canada",
            kind="paraphrase",
            same=True,
            split="train",
            batch=2,
        )
    ]
    examples = pair_examples(train, [("to", "from")])
    assert ("Do you ship to Canada?", "can you deliver to canada", 1.0) in examples
    assert ("Do you ship to Canada?", "Do you ship to Canada?", 1.0) in examples
    assert ("Do you ship to Canada?", "do you ship to canada", 1.0) in examples
    assert ("Do you ship to Canada?", "Do you ship from Canada?", 0.0) in examples


ACCOUNT = LabelledSet(
    name="account",
    domain="accounts",
    split="train",
    entries=(
        SetEntry(id="reset", question="How do I reset my password?", answer="Use the link."),
        SetEntry(id="delete", question="How do I delete my account?", answer="Settings."),
        SetEntry(id="email", question="How do I change my email?", answer="Profile."),
        SetEntry(id="hours", question="When are you open?", answer="9 to 5."),
    ),
    questions=(
        SetQuestion(
            text="close my account for good", kind="confusable", entry="delete", near="email"
        ),
        SetQuestion(text="Can I pause my account?", kind="near_miss", entry=None, near="delete"),
    ),
)


def test_each_question_and_each_entry_is_asked_with_the_index_of_its_right_entry() -> None:
    asked = dict(asked_of(ACCOUNT))
    # the right entry by its index; a near miss targets "none", the index after the entries
    assert asked["close my account for good"] == 1
    assert asked["Can I pause my account?"] == 4
    # each entry is its own right answer, as typed and as a customer might type it again
    assert asked["How do I reset my password?"] == 0
    assert asked["how do i reset my password"] == 0
    assert asked["when are you open"] == 3
    assert len(asked) == 2 + 4 * 2


def test_a_step_asks_each_of_its_questions_against_every_entry_of_its_faq() -> None:
    random.seed(0)
    steps = set_steps([ACCOUNT], size=3)
    entries = tuple(entry.question for entry in ACCOUNT.entries)
    assert all(step.entries == entries for step in steps)  # all siblings, not a few
    asked = [(q, t) for step in steps for q, t in zip(step.questions, step.targets, strict=True)]
    assert sorted(asked) == sorted(asked_of(ACCOUNT))  # each once, with its target
    assert [len(step.questions) for step in steps] == [3, 3, 3, 1]


def test_steps_never_mix_two_faqs() -> None:
    random.seed(1)
    other = replace(ACCOUNT, name="other", entries=ACCOUNT.entries[:2], questions=())
    steps = set_steps([ACCOUNT, other], size=100)
    assert [len(step.entries) for step in steps] == [4, 2]
    assert len(steps[1].questions) == 4  # the other FAQ's two entries, each asked twice
