"""Whole FAQs and the questions asked of them: how the FAQ decision is tuned and judged.

A pair (`labelled_pairs.py`) asks whether one question asks what one entry asks; the product
asks something else: among *all* entries of a team's FAQ, which one, if any, does this
question ask? Each file of `data/faq_sets/` is one realistic support FAQ (one domain, 15-60
entries with only their main question, as a CSV import makes them, several of them close
together) and questions a customer types, each labelled:

- `paraphrase`: asks `entry`, in other words;
- `confusable`: asks `entry`, worded close to a neighbouring entry (`near`);
- `near_miss`: close to `near`, but no entry of the set answers it;
- `off_topic`: no entry answers it, and it is close to none.

A set is in one split, `train` (the verifier learns from it: sibling entries are the hardest
negatives there are), `tune` (choosing the decision's parameters) or `heldout` (the reported
numbers only), or `ci` (a small fixed set the tests pin; neither tuned on nor reported). The
sets were written by domain from one spec (docs/faq.md, "The whole-FAQ benchmark") without
seeing any model's scores; no set is in two splits.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

SetSplit = Literal["train", "tune", "heldout", "ci"]
QuestionKind = Literal["paraphrase", "confusable", "near_miss", "off_topic"]
ANSWERABLE: tuple[QuestionKind, ...] = ("paraphrase", "confusable")
SETS_DIR = Path(__file__).resolve().parent / "data" / "faq_sets"


class LabelledSetError(ValueError):
    """A set breaks one of its rules; the message names the file and what."""


@dataclass(frozen=True, slots=True)
class SetEntry:
    id: str
    question: str
    answer: str


@dataclass(frozen=True, slots=True)
class SetQuestion:
    text: str
    kind: QuestionKind
    entry: str | None  # the entry whose answer is right; None: no entry's is
    near: str | None  # the entry it is worded close to (confusable, near_miss)

    @property
    def answerable(self) -> bool:
        return self.entry is not None


@dataclass(frozen=True, slots=True)
class LabelledSet:
    name: str
    domain: str
    split: SetSplit
    entries: tuple[SetEntry, ...]
    questions: tuple[SetQuestion, ...]


def load_set(path: Path) -> LabelledSet:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        entries = tuple(
            SetEntry(id=str(e["id"]), question=str(e["question"]), answer=str(e["answer"]))
            for e in raw["entries"]
        )
        questions = tuple(
            SetQuestion(
                text=str(q["text"]),
                kind=q["kind"],
                entry=None if q.get("entry") is None else str(q["entry"]),
                near=None if q.get("near") is None else str(q["near"]),
            )
            for q in raw["questions"]
        )
        labelled = LabelledSet(
            name=path.stem,
            domain=str(raw["domain"]),
            split=raw["split"],
            entries=entries,
            questions=questions,
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise LabelledSetError(f"{path.name}: {exc!r}") from exc
    _check(labelled, path.name)
    return labelled


def load_sets(directory: Path = SETS_DIR, *, split: SetSplit | None = None) -> list[LabelledSet]:
    """Every set in `directory` (sorted by name), or those of one split."""
    sets = [load_set(path) for path in sorted(directory.glob("*.json"))]
    return [s for s in sets if split is None or s.split == split]


def sets_sha256(directory: Path = SETS_DIR, *, split: SetSplit) -> str:
    """One digest of the files of one split (what a verifier's rule was chosen on)."""
    digest = hashlib.sha256()
    for labelled in load_sets(directory, split=split):
        digest.update(labelled.name.encode() + b"\0")
        digest.update((directory / f"{labelled.name}.json").read_bytes())
    return digest.hexdigest()


def _check(labelled: LabelledSet, name: str) -> None:
    def fail(why: str) -> None:
        raise LabelledSetError(f"{name}: {why}")

    if labelled.split not in get_args(SetSplit):
        fail(f"unknown split {labelled.split!r}")
    ids = [entry.id for entry in labelled.entries]
    if len(set(ids)) != len(ids):
        fail("entry ids repeat")
    if not ids:
        fail("no entries")
    known = set(ids)
    entry_questions = {_plain(entry.question) for entry in labelled.entries}
    for question in labelled.questions:
        if question.kind not in get_args(QuestionKind):
            fail(f"{question.text!r}: unknown kind {question.kind!r}")
        if (question.entry is not None) != (question.kind in ANSWERABLE):
            needs = "needs" if question.kind in ANSWERABLE else "has no"
            fail(f"{question.text!r}: a {question.kind} {needs} entry")
        for named in (question.entry, question.near):
            if named is not None and named not in known:
                fail(f"{question.text!r}: no entry {named!r}")
        if _plain(question.text) in entry_questions:
            fail(f"{question.text!r} repeats an entry's question")


def _plain(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip("?!. ")
