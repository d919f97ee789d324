"""The labelled pairs file keeps its rules: one split per entry, only paraphrases the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inference.faq.labelled_pairs import (
    LabelledPair,
    LabelledPairsError,
    load_pairs,
    of_split,
    split_for_entry,
)
from inference.faq.verifier import FaqVerifier
from inference.faq.verifier_training import (
    COSINE_FLOORS,
    NEVER,
    THRESHOLDS,
    TrainingOptions,
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


def test_the_threshold_is_the_lowest_that_accepts_no_tune_near_miss() -> None:
    def pair(same: bool) -> LabelledPair:
        kind = "paraphrase" if same else "negation"
        return LabelledPair(a="a", b="b", kind=kind, same=same, split="tune", batch=2)

    pairs = [pair(True), pair(False), pair(True), pair(False)]
    assert choose_threshold(pairs, [0.95, 0.62, 0.70, 0.41]) == 0.63
    assert choose_threshold(pairs, [0.95, 0.9985, 0.70, 0.41]) == 0.999
    assert choose_threshold(pairs, [0.95, 0.9999, 0.70, 0.41]) == 1.0  # accepts nothing


def test_the_floor_and_threshold_keep_every_tune_near_miss_out_at_the_best_recall() -> None:
    def pair(same: bool) -> LabelledPair:
        kind = "paraphrase" if same else "direction"
        return LabelledPair(a="a", b="b", kind=kind, same=same, split="tune", batch=2)

    pairs = [pair(True), pair(True), pair(False), pair(False)]
    cosines = [0.90, 0.55, 0.50, 0.85]
    scores = [0.97, 0.90, 0.95, 0.80]
    # a floor of 0.55 drops the confident near miss at cosine 0.50; 0.81 then keeps out the
    # other one and accepts both paraphrases
    assert choose_thresholds(pairs, cosines, scores) == (0.55, 0.81)


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
    options = TrainingOptions(epochs=1, batch_size=4)
    first = train_verifier(out_dir=tmp_path / "one", pairs_path=pairs, options=options)
    again = train_verifier(out_dir=tmp_path / "two", pairs_path=pairs, options=options)
    assert (again.threshold, again.cosine_floor) == (first.threshold, first.cosine_floor)
    assert first.train_pairs == 4  # the tune pairs were not trained on
    assert first.threshold in (*THRESHOLDS, NEVER)
    assert first.cosine_floor in COSINE_FLOORS
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
    assert not FaqVerifier(model_dir=tmp_path / "one").accepts(
        cosine=cosine, probability=tune_near_miss
    )
