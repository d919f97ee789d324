"""What the FAQ verifier learns from: labelled pairs, made-up near misses and sibling entries.

Three sources, all `(entry question, user question, 1.0 if the entry's answer is right)`:

- the `train` split of `labelled_pairs.jsonl` (`pair_examples`), every entry also against
  itself (as typed and lowercased without its end punctuation: a model that never saw a
  question paired with itself learns that identical wording means a different question);
- near misses made from its paraphrases by the swaps of `data/contrasts.json` ("to" for
  "from", "account" for "order", a changed number): data an operator extends;
- the `train` whole FAQs of `data/faq_sets/` (`sibling_examples`): each question against its
  own entry and against the entries of the *same* FAQ that look most like it. These are the
  negatives that matter in the product, which picks one entry among all of a team's FAQ:
  "close my account for good" against "How do I reset my password?" and "How do I delete my
  account?" in one FAQ. Pairs alone never showed the model two entries of one FAQ.

Pure (no model): the caller passes the cosine the entries are ranked by.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from modelprep.labelled_pairs import LabelledPair
from modelprep.labelled_sets import LabelledSet

CONTRASTS_PATH = Path(__file__).resolve().parent / "data" / "contrasts.json"
Example = tuple[str, str, float]
Cosine = Callable[[str, str], float]


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


def sibling_examples(
    sets: Sequence[LabelledSet], cosine: Cosine, *, hardest: int = 6
) -> list[Example]:
    """Per FAQ: each entry against itself and its `hardest` // 2 closest siblings; each
    question against its own entry (if any), the entry it is worded close to (`near`) and the
    `hardest` other entries closest to it by `cosine`."""
    examples: list[Example] = []
    for labelled in sets:
        question_of = {entry.id: entry.question for entry in labelled.entries}
        entries = list(question_of.values())
        for entry in entries:
            examples.append((entry, entry, 1.0))
            siblings = _closest([e for e in entries if e != entry], entry, cosine)
            examples += [(sibling, entry, 0.0) for sibling in siblings[: hardest // 2]]
        for question in labelled.questions:
            right = question_of[question.entry] if question.entry else None
            if right is not None:
                examples.append((right, question.text, 1.0))
            others = [e for e in entries if e != right]
            chosen = _closest(others, question.text, cosine)[:hardest]
            near = question_of[question.near] if question.near else None
            if near is not None and near != right and near not in chosen:
                chosen.append(near)
            examples += [(other, question.text, 0.0) for other in chosen]
    return examples


def _closest(entries: Sequence[str], text: str, cosine: Cosine) -> list[str]:
    return sorted(entries, key=lambda entry: cosine(entry, text), reverse=True)


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
