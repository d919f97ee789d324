"""What the verifier learns from: made-up near misses and the sibling entries of one FAQ."""

from __future__ import annotations

from modelprep.labelled_pairs import LabelledPair
from modelprep.labelled_sets import LabelledSet, SetEntry, SetQuestion
from modelprep.verifier_examples import contrasts, pair_examples, sibling_examples


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


def word_overlap(a: str, b: str) -> float:
    """A stand-in for the embedding cosine: shared words."""

    def words(text: str) -> set[str]:
        return set(text.lower().rstrip("?").split())

    return float(len(words(a) & words(b)))


def test_a_question_is_taught_against_its_closest_siblings_and_the_one_it_sounds_like() -> None:
    examples = sibling_examples([ACCOUNT], word_overlap, hardest=1)
    of_close = {a: label for a, b, label in examples if b == "close my account for good"}
    # its own entry is right; the closest other (reset: "my") is wrong, and so is `near`
    # (email), added though the cosine does not rank it first; the rest are left out
    assert of_close == {
        "How do I delete my account?": 1.0,
        "How do I reset my password?": 0.0,
        "How do I change my email?": 0.0,
    }
    of_pause = {a: label for a, b, label in examples if b == "Can I pause my account?"}
    assert of_pause == {"How do I delete my account?": 0.0}  # a near miss: no entry is right


def test_each_entry_is_itself_and_not_its_closest_sibling() -> None:
    examples = sibling_examples([ACCOUNT], word_overlap, hardest=2)
    of_reset = [(a, label) for a, b, label in examples if b == "How do I reset my password?"]
    assert of_reset == [
        ("How do I reset my password?", 1.0),
        ("How do I delete my account?", 0.0),
    ]
