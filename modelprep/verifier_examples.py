"""What the FAQ verifier learns from: labelled pairs, made-up near misses and sibling entries.

Three sources; pairs are `(entry question, user question, 1.0 if the entry's answer is right)`:

- the `train` split of `labelled_pairs.jsonl` (`pair_examples`), every entry also against
  itself (as typed and lowercased without its end punctuation: a model that never saw a
  question paired with itself learns that identical wording means a different question);
- near misses made from its paraphrases by the swaps of `data/contrasts.json` ("to" for
  "from", "account" for "order", a changed number): data an operator extends;
- the `train` whole FAQs of `data/faq_sets/` (`set_steps`): each question against *all* the
  entries of its FAQ at once, taught which one is right, or that none is.
  These are the negatives that matter in the product, which picks one entry among a FAQ:
  "close my account for good" against "How do I reset my password?" and "How do I delete my
  account?" in one FAQ. Pairs alone never show the model two entries of one FAQ, and one
  softmax over the entries and "none" makes a score mean the same whichever entry it is for.

Pure (no model).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from modelprep.labelled_pairs import LabelledPair
from modelprep.labelled_sets import LabelledSet

CONTRASTS_PATH = Path(__file__).resolve().parent / "data" / "contrasts.json"
Example = tuple[str, str, float]


def load_swaps(path: Path = CONTRASTS_PATH) -> list[tuple[str, str]]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [(str(a), str(b)) for a, b in raw["swaps"]]


def contrasts(text: str, swaps: Sequence[tuple[str, str]], *, limit: int = 2) -> list[str]:
    """Up to `limit` questions that differ from `text` by one swap or one changed number."""
    found: list[str] = []
    for one, other in [*swaps, *((b, a) for a, b in swaps)]:
        pattern = re.compile(rf"\b{re.escape(one)}\b", re.IGNORECASE)
        match = pattern.search(text)
        if match:
            word = other.capitalize() if match.group(0)[0].isupper() else other
            found.append(text[: match.start()] + word + text[match.end() :])
    number = re.search(r"\d+", text)
    if number:
        changed = str(int(number.group(0)) * 2 + 1)
        found.append(text[: number.start()] + changed + text[number.end() :])
    unique = [variant for variant in dict.fromkeys(found) if variant.lower() != text.lower()]
    return random.sample(unique, min(limit, len(unique)))


def pair_examples(train: Sequence[LabelledPair], swaps: Sequence[tuple[str, str]]) -> list[Example]:
    """Every pair, every entry against itself, and made-up near misses of each paraphrase."""
    examples = [(p.a, p.b, float(p.same)) for p in train]
    for entry in dict.fromkeys(p.a for p in train):
        examples.append((entry, entry, 1.0))
        plain = entry.lower().rstrip("?!. ")
        if plain != entry:
            examples.append((entry, plain, 1.0))
    known = {(p.a.lower(), p.b.lower()) for p in train}
    for pair in train:
        if not pair.same:
            continue
        for source in (pair.a, pair.b):
            for variant in contrasts(source, swaps):
                if (pair.a.lower(), variant.lower()) not in known:
                    known.add((pair.a.lower(), variant.lower()))
                    examples.append((pair.a, variant, 0.0))
    return examples


@dataclass(frozen=True, slots=True)
class SetStep:
    """One step of the decision among entries: a few questions of one FAQ, each against *all*
    of its entries; `targets[i]` is the index of the entry whose answer is right for
    `questions[i]`, or `len(entries)` when none is (a near miss, an off-topic question)."""

    entries: tuple[str, ...]
    questions: tuple[str, ...]
    targets: tuple[int, ...]


def set_steps(sets: Sequence[LabelledSet], *, size: int) -> list[SetStep]:
    """Each FAQ's questions (`asked_of`), shuffled, in steps of `size`; every step holds all
    its entries (a softmax over only the 12 closest trained 2.6x faster but answered less:
    bench/notes/2026-12-07-faq-listwise.md)."""
    steps: list[SetStep] = []
    for labelled in sets:
        entries = tuple(entry.question for entry in labelled.entries)
        asked = asked_of(labelled)
        random.shuffle(asked)
        for start in range(0, len(asked), size):
            chunk = asked[start : start + size]
            steps.append(SetStep(entries, tuple(t for t, _ in chunk), tuple(i for _, i in chunk)))
    return steps


def asked_of(labelled: LabelledSet) -> list[tuple[str, int]]:
    """(question, index of the entry whose answer is right, or len(entries) for none): the
    FAQ's labelled questions, and each entry asked as typed and lowercased without its end
    punctuation (taught only against siblings, a near repeat scored below the threshold)."""
    ids = [entry.id for entry in labelled.entries]
    asked = [(q.text, ids.index(q.entry) if q.entry else len(ids)) for q in labelled.questions]
    for number, entry in enumerate(labelled.entries):
        plain = entry.question.lower().rstrip("?!. ")
        asked += [(text, number) for text in dict.fromkeys((entry.question, plain))]
    return asked


def batches(examples: Sequence[Example], *, size: int) -> list[list[Example]]:
    """Shuffled batches of similar lengths (less padding: each step costs its longest pair);
    `examples` should already be shuffled."""
    window = size * 20
    out: list[list[Example]] = []
    for start in range(0, len(examples), window):
        chunk = sorted(examples[start : start + window], key=lambda e: len(e[0]) + len(e[1]))
        out.extend(chunk[i : i + size] for i in range(0, len(chunk), size))
    random.shuffle(out)
    return out
