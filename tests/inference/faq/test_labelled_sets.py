"""The whole-FAQ sets the decision is tuned and judged on keep their rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelprep.labelled_sets import LabelledSetError, load_set, load_sets, sets_sha256
from modelprep.proportions import wilson_interval


def test_the_sets_are_realistic_faqs_each_in_one_split() -> None:
    # one domain per set: no domain is learned from (train) and judged (tune, heldout)
    sets = load_sets()
    assert {s.split for s in sets} == {"train", "tune", "heldout", "ci"}
    for labelled in sets:
        assert 15 <= len(labelled.entries) <= 60, labelled.name
        kinds = {q.kind for q in labelled.questions}
        assert kinds == {"paraphrase", "confusable", "near_miss", "off_topic"}, labelled.name
    assert len({s.domain for s in sets}) == len(sets)


def test_the_heldout_sets_are_big_enough_to_show_the_goals() -> None:
    """0 wrong-entry answers must mean an upper bound <= 0.5%, and near-miss hits are held
    to a 1% upper bound: with too few questions no result could show either."""
    heldout = [q for s in load_sets(split="heldout") for q in s.questions]
    answerable = sum(q.answerable for q in heldout)
    near_misses = sum(q.kind == "near_miss" for q in heldout)
    assert wilson_interval(0, answerable)[1] <= 0.005
    assert wilson_interval(0, near_misses)[1] <= 0.01


def test_a_rule_choice_depends_on_the_tune_files_only(tmp_path: Path) -> None:
    for source in load_sets():
        raw = {
            "domain": source.domain,
            "split": source.split,
            "entries": [
                {"id": e.id, "question": e.question, "answer": e.answer} for e in source.entries
            ],
            "questions": [],
        }
        (tmp_path / f"{source.name}.json").write_text(json.dumps(raw), encoding="utf-8")
    before = sets_sha256(tmp_path, split="tune")
    airline = tmp_path / "airline.json"  # a heldout set gains a question
    raw = json.loads(airline.read_text(encoding="utf-8"))
    raw["questions"].append({"text": "hello", "kind": "off_topic", "entry": None})
    airline.write_text(json.dumps(raw), encoding="utf-8")
    assert sets_sha256(tmp_path, split="tune") == before
    assert load_set(airline).questions[-1].text == "hello"


def write(tmp_path: Path, **changes: object) -> Path:
    raw: dict[str, object] = {
        "domain": "a shop",
        "split": "tune",
        "entries": [
            {"id": "reset", "question": "How do I reset my password?", "answer": "..."},
            {"id": "delete", "question": "How do I delete my account?", "answer": "..."},
        ],
        "questions": [{"text": "forgot my password", "kind": "paraphrase", "entry": "reset"}],
    }
    raw.update(changes)
    path = tmp_path / "shop.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("question", "why"),
    [
        ({"text": "forgot it", "kind": "paraphrase", "entry": None}, "needs entry"),
        ({"text": "close it", "kind": "near_miss", "entry": "delete"}, "has no entry"),
        ({"text": "forgot it", "kind": "paraphrase", "entry": "nope"}, "no entry 'nope'"),
        ({"text": "how do I reset my password", "kind": "paraphrase", "entry": "reset"}, "repeats"),
        ({"text": "hi", "kind": "greeting", "entry": None}, "unknown kind"),
    ],
)
def test_a_broken_question_is_refused_naming_the_file(
    tmp_path: Path, question: dict[str, object], why: str
) -> None:
    with pytest.raises(LabelledSetError, match=f"shop.json: .*{why}"):
        load_set(write(tmp_path, questions=[question]))


def test_a_set_loads(tmp_path: Path) -> None:
    labelled = load_set(write(tmp_path))
    assert (labelled.name, labelled.split, len(labelled.entries)) == ("shop", "tune", 2)
    assert labelled.questions[0].answerable
