"""The labelled pairs file keeps its rules: one split per entry, only paraphrases the same."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from inference.faq.candidates import Candidate
from inference.faq.verifier import FaqVerifier
from modelprep.labelled_pairs import (
    LabelledPair,
    LabelledPairsError,
    load_pairs,
    of_split,
    split_for_entry,
)
from modelprep.labelled_sets import SETS_DIR, LabelledSet, SetEntry, SetQuestion
from modelprep.proportions import wilson_interval
from modelprep.set_judging import ScoredQuestion, ScoredSet
from modelprep.verifier_training import (
    COSINE_FLOORS,
    FALSE_HIT_BOUND,
    MARGINS,
    NEVER,
    TrainingOptions,
    allowed_false_hits,
    choose_rule,
    pair_cosines,
    train_verifier,
)


def write(path: Path, *rows: dict[str, object]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def row(a: str, b: str, *, kind: str = "paraphrase", split: str = "train") -> dict[str, object]:
    return {"a": a, "b": b, "kind": kind, "same": kind == "paraphrase", "split": split, "batch": 2}


def test_the_shipped_pairs_are_split_by_entry_into_all_three_splits() -> None:
    pairs = load_pairs()
    splits = {pair.split for pair in pairs}
    assert splits == {"train", "tune", "heldout"}
    entries = {pair.a.strip().lower(): pair.split for pair in pairs}
    assert all(entries[pair.a.strip().lower()] == pair.split for pair in pairs)
    for held in (of_split(pairs, "tune"), of_split(pairs, "heldout")):
        assert any(p.same for p in held)
        assert any(not p.same for p in held)


def test_an_entry_in_two_splits_is_refused_with_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path / "pairs.jsonl",
        row("Where is my order?", "where's my stuff"),
        row("Where is my order?", "track my order", split="heldout"),
    )
    with pytest.raises(LabelledPairsError, match=r"pairs.jsonl:2: entry 'Where is my order\?'"):
        load_pairs(path)


def test_a_near_miss_marked_same_is_refused(tmp_path: Path) -> None:
    bad = {**row("Do you ship to Canada?", "Do you ship from Canada?", kind="direction")}
    bad["same"] = True
    with pytest.raises(LabelledPairsError, match="only paraphrases are the same"):
        load_pairs(write(tmp_path / "pairs.jsonl", bad))


def test_a_new_entry_gets_a_stable_split() -> None:
    assert split_for_entry("What are your opening hours?") == split_for_entry(
        "  what are your opening hours?"
    )


def test_false_hits_are_allowed_only_while_the_interval_stays_within_the_bound() -> None:
    assert allowed_false_hits(100, 0.01) == 0  # too few to show 1% even with none
    assert allowed_false_hits(700, 0.01) == 1
    assert allowed_false_hits(2000, 0.01) == 11
    assert wilson_interval(allowed_false_hits(2000, 0.01), 2000)[1] <= 0.01
    assert wilson_interval(allowed_false_hits(2000, 0.01) + 1, 2000)[1] > 0.01


def pair(same: bool) -> LabelledPair:
    kind = "paraphrase" if same else "direction"
    return LabelledPair(a="a", b="b", kind=kind, same=same, split="tune", batch=2)


def one_set(*questions: tuple[str, str | None, dict[str, float]]) -> ScoredSet:
    """A tune FAQ of entries `a` and `b` (ids 0 and 1); each question: its text, its entry,
    and the verifier's probability for each entry (both are candidates, cosine 0.9 / 0.8)."""
    labelled = LabelledSet(
        name="tiny",
        domain="test",
        split="tune",
        entries=(
            SetEntry(id="a", question="A?", answer="a"),
            SetEntry(id="b", question="B?", answer="b"),
        ),
        questions=tuple(
            SetQuestion(
                text=text,
                kind="paraphrase" if entry else "off_topic",
                entry=entry,
                near=None,
            )
            for text, entry, _ in questions
        ),
    )
    scored = []
    for (_, _, probabilities), question in zip(questions, labelled.questions, strict=True):
        candidates = (
            Candidate(entry_id=0, phrasing="A?", score=0.9),
            Candidate(entry_id=1, phrasing="B?", score=0.8),
        )
        scored.append(
            ScoredQuestion(
                question=question,
                candidates=candidates,
                probabilities={(0, "A?"): probabilities["a"], (1, "B?"): probabilities["b"]},
            )
        )
    return ScoredSet(labelled=labelled, questions=tuple(scored))


def test_the_rule_answers_no_tune_question_wrongly_at_the_best_recall() -> None:
    sets = [
        one_set(
            ("asks a, clearly", "a", {"a": 0.999, "b": 0.01}),
            ("asks a, b close behind", "a", {"a": 0.97, "b": 0.96}),
            ("asks b, but a scores higher", "b", {"a": 0.95, "b": 0.90}),
            ("asks b", "b", {"a": 0.01, "b": 0.93}),
        )
    ]
    pairs = [pair(True), pair(False)]
    # the 0.95 wrong answer must stay out: a margin over the runner-up does it (0.95 vs 0.90
    # is 0.7 log-odds), so 0.9 answers the clear ones and the close call is declined
    choice = choose_rule(pairs, [0.9, 0.9], [0.99, 0.3], sets)
    assert choice.sets.wrong_entry == 0
    assert choice.sets.right == 2  # "asks a, clearly" and "asks b"
    assert (choice.rule.threshold, choice.rule.margin) == (0.9, 1.0)
    # equal recalls: the highest floor that still scores both entries (above it, the wrong
    # 0.95 has no runner-up to lose to)
    assert choice.rule.cosine_floor == 0.8
    assert (choice.pair_recall, choice.pair_false_hits) == (1.0, 0)


def test_a_pair_near_miss_above_the_threshold_rules_it_out() -> None:
    sets = [one_set(("asks a", "a", {"a": 0.96, "b": 0.01}))]
    # the tune pair near miss scores 0.97 and none of 1 may be accepted: the threshold must
    # be above it, so the 0.96 question is not answered
    choice = choose_rule([pair(True), pair(False)], [0.9, 0.9], [0.99, 0.97], sets)
    assert choice.rule.threshold > 0.97
    assert choice.sets.right == 0


def test_with_no_safe_rule_nothing_is_answered() -> None:
    sets = [one_set(("asks b", "b", {"a": 0.99999, "b": 0.01}))]
    choice = choose_rule([pair(True)], [0.9], [0.99], sets)
    assert choice.rule.threshold == NEVER
    assert (choice.sets.right, choice.sets.wrong_entry) == (0, 0)


def test_training_is_seeded_and_the_threshold_comes_from_the_tune_split(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    pairs = write(
        tmp_path / "pairs.jsonl",
        row("Do you ship to Canada?", "can you deliver to canada"),
        row("Do you ship to Canada?", "Do you ship from Canada?", kind="direction"),
        row("How do I reset my password?", "forgot my password"),
        row("How do I reset my password?", "How do I reset my router?", kind="object"),
        row("Where is my order?", "where's my package", split="tune"),
        row("Where is my order?", "Where is my refund?", kind="object", split="tune"),
    )
    sets = tmp_path / "sets"
    sets.mkdir()
    shutil.copy(SETS_DIR / "support-basics.json", sets / "support-basics.json")  # split "ci"
    tune = json.loads((SETS_DIR / "online-shop.json").read_text(encoding="utf-8"))
    tune["questions"] = tune["questions"][:12]  # a small tune set: seconds, not minutes
    (sets / "online-shop.json").write_text(json.dumps(tune), encoding="utf-8")
    train = json.loads((SETS_DIR / "hotel-booking.json").read_text(encoding="utf-8"))
    train["questions"] = train["questions"][:12]  # siblings of a small train FAQ
    (sets / "hotel-booking.json").write_text(json.dumps(train), encoding="utf-8")
    options = TrainingOptions(epochs=1, batch_size=4)
    first = train_verifier(
        out_dir=tmp_path / "one", pairs_path=pairs, sets_dir=sets, options=options
    )
    again = train_verifier(
        out_dir=tmp_path / "two", pairs_path=pairs, sets_dir=sets, options=options
    )
    assert (again.threshold, again.cosine_floor, again.margin) == (
        first.threshold,
        first.cosine_floor,
        first.margin,
    )
    assert first.margin in MARGINS
    assert first.train_pairs == 4  # the tune pairs were not trained on
    assert first.train_sets == 1  # the train FAQ, not the tune or ci ones
    assert 0.0 <= first.threshold <= NEVER
    assert first.cosine_floor in COSINE_FLOORS
    assert (first.tune_near_misses, first.false_hit_bound) == (1, FALSE_HIT_BOUND)
    questions = [("Where is my order?", "where's my package"), ("a", "b")]
    scores = FaqVerifier(model_dir=tmp_path / "one").probabilities(questions)
    assert all(0.0 <= score <= 1.0 for score in scores)
    assert scores == pytest.approx(
        FaqVerifier(model_dir=tmp_path / "two").probabilities(questions), abs=1e-5
    )
    tune_near_miss = FaqVerifier(model_dir=tmp_path / "one").probabilities(
        [("Where is my order?", "Where is my refund?")]
    )[0]
    cosine = pair_cosines(
        [
            LabelledPair(
                a="Where is my order?",
                b="Where is my refund?",
                kind="object",
                same=False,
                split="tune",
                batch=2,
            )
        ]
    )[0]
    assert cosine < first.cosine_floor or tune_near_miss < first.threshold
