"""The labelled pairs file keeps its rules: one split per entry, only paraphrases the same."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from inference.faq.labelled_pairs import (
    LabelledPair,
    LabelledPairsError,
    load_pairs,
    of_split,
    split_for_entry,
)
from inference.faq.labelled_sets import SETS_DIR
from inference.faq.proportions import wilson_interval
from inference.faq.verifier import FaqVerifier
from inference.faq.verifier_training import (
    COSINE_FLOORS,
    FALSE_HIT_BOUND,
    MARGINS,
    NEVER,
    TrainingOptions,
    allowed_false_hits,
    choose_threshold,
    choose_thresholds,
    contrasts,
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


def test_the_threshold_is_the_lowest_that_accepts_at_most_the_allowed_near_misses() -> None:
    near_misses = [0.62, 0.41, 0.9985]
    assert choose_threshold(near_misses, 0) == math.nextafter(0.9985, math.inf)
    assert choose_threshold(near_misses, 1) == math.nextafter(0.62, math.inf)
    assert choose_threshold(near_misses, 3) == 0.0  # none is left to keep out
    assert choose_threshold([1.0], 0) == NEVER  # nothing can be accepted
    assert all(score >= choose_threshold(near_misses, 1) for score in (0.95, 0.63))


def test_false_hits_are_allowed_only_while_the_interval_stays_within_the_bound() -> None:
    assert allowed_false_hits(100, 0.01) == 0  # too few to show 1% even with none
    assert allowed_false_hits(700, 0.01) == 1
    assert allowed_false_hits(2000, 0.01) == 11
    assert wilson_interval(allowed_false_hits(2000, 0.01), 2000)[1] <= 0.01
    assert wilson_interval(allowed_false_hits(2000, 0.01) + 1, 2000)[1] > 0.01


def test_the_floor_and_threshold_keep_the_tune_near_misses_out_at_the_best_recall() -> None:
    def pair(same: bool) -> LabelledPair:
        kind = "paraphrase" if same else "direction"
        return LabelledPair(a="a", b="b", kind=kind, same=same, split="tune", batch=2)

    pairs = [pair(True), pair(True), pair(False), pair(False)]
    cosines = [0.90, 0.55, 0.50, 0.85]
    scores = [0.97, 0.90, 0.95, 0.80]
    # a floor of 0.55 drops the confident near miss at cosine 0.50; just above 0.80 then
    # keeps out the other one and accepts both paraphrases
    choice = choose_thresholds(pairs, cosines, scores)
    assert (choice.floor, choice.threshold) == (0.55, math.nextafter(0.80, math.inf))
    assert (choice.recall, choice.false_hits) == (1.0, 0)


def test_made_up_near_misses_differ_by_one_swap_or_number() -> None:
    swaps = [("to", "from"), ("account", "order")]
    assert contrasts("Do you ship to Canada?", swaps) == ["Do you ship from Canada?"]
    assert contrasts("Delete my order", swaps) == ["Delete my account"]
    assert contrasts("A 30 day return", swaps) == ["A 61 day return"]
    assert contrasts("What are your opening hours?", swaps) == []


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
