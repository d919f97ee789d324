"""When may a cached FAQ answer be served for a question? Cosine threshold + lexical guard.

The earlier rule, kept as `INFERENCE_FAQ_DECISION=guard` (`deciders.GuardDecision`); the
shipped decision is the learned verifier (`deciders.VerifierDecision`), which on held-out
entries answers four times as many paraphrases with a ninth of the false hits
(bench/README.md, "Batch 4 and the shipped verifier").

Cosine similarity alone cannot separate paraphrases from near misses with all-MiniLM-L6-v2
(measured on batch 1 of inference/faq/data/labelled_pairs.jsonl): paraphrases score 0.37-0.98,
negations ("turn on" vs "turn off") 0.64-0.97, amounts ("$10" vs "$100") 0.84-1.00. So a hit
needs BOTH a score at or above a calibrated threshold AND a lexical guard that vetoes the structural
differences the embedding is blind to. The guard is deliberately conservative: a wrong cached
answer is worse than a slower model answer, so a word it does not know must be on both sides.

The guard compares the two texts after normalisation (lowercase, contractions expanded,
multi-word terms such as "log in" or "gift card" joined, synonyms grouped, light stemming,
typo tolerance) and vetoes, in this order, with a reason that names the words involved:

1. numbers: the numbers (amounts, counts, sizes, durations, ordinals; "twice" = 2) must be the
   same, in the same order ("$10" vs "$100", "9.99 instead of 4.99" vs the reverse);
2. negation: a negation ("not", "never", "no", "without", "unable", "un-" words) on one side
   only, or negations of different words ("not detected" vs "no signal");
3. polarity: words at opposite poles of an axis (on/off, enable/disable, start/stop/cancel,
   open/close, add/remove, increase/decrease, upgrade/downgrade, lock/unlock, log in/out, ...);
4. direction: both sides say "from X to Y" / "instead of" and name the same things in another
   order ("upgrade from Family to Business" vs the reverse);
5. subjects: a specific object or qualifier present on one side only ("password" vs "router",
   "order" vs "subscription", "premium" vs "basic", "s23" vs "s24"); words the lexicon does not
   know are presumed to be such objects (product names, places), typos aside;
6. wording: each side has an action or a general content word the other lacks ("track" vs
   "cancel", "pause" vs "cancel", "new" vs "used"); one side may add some ("where is" vs
   "track"), but not swap them;
7. the same actions in another order ("recover a deleted order" vs "delete a recovered order").

Function words and politeness ("how", "my", "please") are ignored. The words of each part are
data, `data/guard_lexicon.json`; an operator replaces it for their domain with
FAQ_GUARD_LEXICON (see `load_lexicon`). Everything here is pure and cheap (~0.1 ms per pair
cold, ~5 us once the per-text analyses are cached).
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Any

# Chosen by `python -m bench.faq_calibration` on batch 1 of faq/data/labelled_pairs.jsonl (438
# labelled pairs, real all-MiniLM-L6-v2): best recall with zero false hits on every negative
# kind with the guard on picks 0.51; its safety floor (`SAFETY_FLOOR`: below 0.70 a hit would
# rest on the guard alone, which blind batches showed misses ~1 unseen near miss in 11) makes
# it 0.70. At 0.70: precision 1.000, recall 0.567 (106/187 paraphrase pairs), 0 false hits; cosine
# alone would have 137 false hits. Tables: bench/README.md, "FAQ cache calibration".
CALIBRATED_THRESHOLD = 0.70

# A refused question whose best entry scores at least this is shown to the admin as a suggested
# phrasing of it (no answer depends on it: an admin decides). Paraphrases in the labelled pairs
# score from 0.37; below 0.50 the suggestions would be mostly unrelated questions.
SUGGEST_FLOOR = 0.50


@dataclass(frozen=True, slots=True)
class Candidate:
    """One FAQ entry's best-scoring phrasing for a query (cosine of unit vectors)."""

    entry_id: int
    phrasing: str
    score: float


@dataclass(frozen=True, slots=True)
class MatchDecision:
    entry_id: int
    phrasing: str
    score: float
    accepted: bool
    reason: str


@dataclass(frozen=True, slots=True)
class GuardResult:
    passed: bool
    reason: str


class Kind(Enum):
    OBJECT = "object"  # a specific thing or state: must be on both sides
    QUALIFIER = "qualifier"  # plan tier, colour, size, unit, model code: must be on both sides
    ACTION = "action"  # what the user wants done: a different action on each side vetoes
    SOFT = "soft"  # too general to name a topic ("account", "new"): matters only as a swap
    STOP = "stop"  # function words and politeness: ignored


# --- lexicon ------------------------------------------------------------------------------
# The vocabulary is data (data/guard_lexicon.json, its "about" says what each part does), so
# an operator can replace it for their domain: FAQ_GUARD_LEXICON=/path/to/lexicon.json.

LEXICON_PATH = Path(__file__).parent / "data" / "guard_lexicon.json"
_LEXICON_KEYS = (
    "objects",
    "qualifiers",
    "actions",
    "axes",
    "soft",
    "stopwords",
    "negations",
    "polarity_only",
    "direction_words",
    "number_words",
    "phrases",
)


def load_lexicon(path: Path | None = None) -> dict[str, Any]:
    """The guard's vocabulary: `path`, else FAQ_GUARD_LEXICON, else the packaged one. Raises
    ValueError naming the file and the part that is wrong."""
    path = path or Path(os.environ.get("FAQ_GUARD_LEXICON") or LEXICON_PATH)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"FAQ guard lexicon {path}: {exc}") from exc
    missing = [key for key in _LEXICON_KEYS if key not in data]
    if missing:
        raise ValueError(f"FAQ guard lexicon {path}: missing {', '.join(missing)}")

    def words(value: object, where: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(w, str) and w for w in value):
            raise ValueError(f"FAQ guard lexicon {path}: {where} must be a list of words")
        return tuple(value)

    def table(key: str) -> dict[str, tuple[str, ...]]:
        if not isinstance(data[key], dict):
            raise ValueError(f"FAQ guard lexicon {path}: {key} must map concepts to words")
        return {concept: words(ws, f"{key}.{concept}") for concept, ws in data[key].items()}

    if not all(isinstance(axis, list) and len(axis) == 2 for axis in data["axes"]):
        raise ValueError(f"FAQ guard lexicon {path}: each of axes must be [pole, opposite pole]")
    if not all(
        isinstance(rule, list) and len(rule) == 2 and all(isinstance(p, str) for p in rule)
        for rule in data["phrases"]
    ):
        raise ValueError(f"FAQ guard lexicon {path}: each of phrases must be [regex, replacement]")
    try:
        phrases = tuple((re.compile(pattern), repl) for pattern, repl in data["phrases"])
    except re.error as exc:
        raise ValueError(f"FAQ guard lexicon {path}: phrases: {exc}") from exc
    numbers = data["number_words"]
    if not isinstance(numbers, dict) or not all(isinstance(n, str) for n in numbers.values()):
        raise ValueError(f"FAQ guard lexicon {path}: number_words must map words to numbers")
    return {
        "objects": table("objects"),
        "qualifiers": table("qualifiers"),
        "actions": table("actions"),
        "soft": table("soft"),
        "axes": tuple(
            (frozenset(words(on, "axes")), frozenset(words(off, "axes")))
            for on, off in data["axes"]
        ),
        "stopwords": words(data["stopwords"], "stopwords"),
        "negations": frozenset(words(data["negations"], "negations")),
        "polarity_only": frozenset(words(data["polarity_only"], "polarity_only")),
        "direction_words": frozenset(words(data["direction_words"], "direction_words")),
        "number_words": dict(numbers),
        "phrases": phrases,
    }


_LEXICON_DATA = load_lexicon()
_OBJECTS: dict[str, tuple[str, ...]] = _LEXICON_DATA["objects"]
_QUALIFIERS: dict[str, tuple[str, ...]] = _LEXICON_DATA["qualifiers"]
_ACTIONS: dict[str, tuple[str, ...]] = _LEXICON_DATA["actions"]
# Opposite poles: a word of one pole facing a word of the other vetoes ("cancel" vs "start").
_AXES: tuple[tuple[frozenset[str], frozenset[str]], ...] = _LEXICON_DATA["axes"]
# Content words too general to name an FAQ topic: tolerated on one side only ("my account"),
# but a soft word facing a different unmatched word is a substitution ("new" vs "used").
_SOFT: dict[str, tuple[str, ...]] = _LEXICON_DATA["soft"]
_STOPWORDS: tuple[str, ...] = _LEXICON_DATA["stopwords"]
_NEGATIONS: frozenset[str] = _LEXICON_DATA["negations"]
# Words that only matter against their opposite: "after" alone is no action of its own.
_POLARITY_ONLY: frozenset[str] = _LEXICON_DATA["polarity_only"]
# "from X to Y" / "X instead of Y": the order of the things named matters.
_DIRECTION_WORDS: frozenset[str] = _LEXICON_DATA["direction_words"]
_NUMBER_WORDS: dict[str, str] = _LEXICON_DATA["number_words"]
# Multi-word terms and spelling variants, applied in order to the lowercased text.
_PHRASES: tuple[tuple[re.Pattern[str], str], ...] = _LEXICON_DATA["phrases"]

_NUMBER = re.compile(r"^\d+(?:[.,]\d+)*$")
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
_NUMBER_UNIT = re.compile(r"^(\d+(?:[.,]\d+)?)([a-z]+)$")
_TOKEN = re.compile(r"[a-z0-9_$€£.,]+")
_CURRENCY = {"$": "usd", "€": "eur", "£": "gbp"}


def _build_lexicon() -> tuple[dict[str, tuple[Kind, str]], frozenset[str]]:
    lexicon: dict[str, tuple[Kind, str]] = {}

    def put(words: Iterable[str], kind: Kind, concept: str) -> None:
        for word in words:
            if word in lexicon and lexicon[word] != (kind, concept):
                raise ValueError(f"lexicon: {word!r} is in two concepts")
            lexicon[word] = (kind, concept)

    for concept, words in _OBJECTS.items():
        put(words, Kind.OBJECT, concept)
    for concept, words in _QUALIFIERS.items():
        put(words, Kind.QUALIFIER, concept)
    for concept, words in _ACTIONS.items():
        put(words, Kind.ACTION, concept)
    for concept, words in _SOFT.items():
        # a word with a specific meaning elsewhere keeps it
        put((word for word in words if word not in lexicon), Kind.SOFT, concept)
    stopwords = frozenset(_STOPWORDS) - lexicon.keys()
    return lexicon, stopwords


_LEXICON, _STOPWORD_SET = _build_lexicon()
_POLE: dict[str, tuple[int, int]] = {
    concept: (axis, pole)
    for axis, poles in enumerate(_AXES)
    for pole, concepts in enumerate(poles)
    for concept in concepts
}
_POLARITY_ONLY_KEYS = frozenset(
    concept if concept not in _POLE else f"axis{_POLE[concept][0]}:{_POLE[concept][1]}"
    for concept in _POLARITY_ONLY
)
# Typo targets: content words only, never function words (a typo'd object must not vanish).
_FUZZY_TARGETS: dict[str, tuple[str, ...]] = {}
for _word in sorted(_LEXICON):
    if "_" not in _word and len(_word) >= 4:
        _FUZZY_TARGETS[_word[0]] = (*_FUZZY_TARGETS.get(_word[0], ()), _word)


def _edit_distance(a: str, b: str, limit: int) -> int:
    """Optimal string alignment distance (a swap of neighbours counts 1), capped at limit + 1."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]


def _typo_limit(word: str) -> int:
    return 0 if len(word) < 5 else (1 if len(word) < 8 else 2)


def _stem_candidates(word: str) -> Iterable[str]:
    yield word
    for suffix, replacement in (
        ("ies", "y"),
        ("es", ""),
        ("s", ""),
        ("ing", ""),
        ("ing", "e"),
        ("ed", ""),
        ("ed", "e"),
        ("d", ""),
        ("ment", ""),
        ("ly", ""),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: -len(suffix)] + replacement
            yield stem
            if suffix in ("ing", "ed") and len(stem) >= 4 and stem[-1] == stem[-2]:
                yield stem[:-1]  # shipped -> ship, cancelled -> cancel


@lru_cache(maxsize=8192)
def _classify(word: str) -> tuple[Kind, str] | None:
    """(kind, concept) of a known word; None for a word the lexicon does not know."""
    for candidate in _stem_candidates(word):
        if candidate in _LEXICON:
            return _LEXICON[candidate]
        if candidate in _STOPWORD_SET:
            return (Kind.STOP, candidate)
    limit = _typo_limit(word)
    if limit:
        matches = {
            _LEXICON[target]
            for target in _FUZZY_TARGETS.get(word[0], ())
            if _edit_distance(word, target, limit) <= limit
        }
        if len(matches) == 1:  # an ambiguous typo stays unknown
            return matches.pop()
    return None


def _number(text: str) -> str:
    try:
        value = Decimal(text.replace(",", ""))
    except InvalidOperation:
        return text
    return format(value.normalize(), "f")


@dataclass(frozen=True, slots=True)
class Analysis:
    """What the guard compares; each concept maps back to the word that named it (reasons)."""

    numbers: tuple[str, ...]
    negations: tuple[str, ...]
    negated: frozenset[str]  # what each negation applies to: the next content word's concept
    concepts: dict[tuple[Kind, str], str]
    unknown: dict[str, str]  # stem -> word, for words the lexicon does not know
    order: tuple[str, ...]  # concepts and unknown stems in order of first mention
    directional: bool


def _tokens(text: str) -> list[str]:
    text = unicodedata.normalize("NFKC", text).lower()
    for pattern, replacement in _PHRASES:
        text = pattern.sub(replacement, text)
    tokens: list[str] = []
    for raw in _TOKEN.findall(text):
        token = raw.strip(".,")
        if not token:
            continue
        if token[0] in _CURRENCY:
            tokens.append(_CURRENCY[token[0]])
            token = token[1:].strip(".,")
            if not token:
                continue
        if token[-1] in _CURRENCY:
            tokens.extend([token[:-1], _CURRENCY[token[-1]]])
            continue
        tokens.append(token)
    return tokens


def _unknown_stem(word: str) -> str:
    # plurals of words the lexicon does not know: "dogs" = "dog", "boxes" = "box"
    if len(word) > 4 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


@lru_cache(maxsize=4096)
def analyse(text: str) -> Analysis:
    numbers: list[str] = []
    negations: list[str] = []
    negated: set[str] = set()
    concepts: dict[tuple[Kind, str], str] = {}
    unknown: dict[str, str] = {}
    order: list[str] = []
    directional = False
    pending_negation = False

    def mention(key: str) -> None:
        nonlocal pending_negation
        if pending_negation and key not in ("toward", "away"):  # "unable to log in"
            negated.add(key)
            pending_negation = False
        if key not in order:
            order.append(key)

    for token in _tokens(text):
        if _NUMBER.match(token):
            numbers.append(_number(token))
            mention(f"#{numbers[-1]}")
            continue
        if match := _ORDINAL.match(token):
            numbers.append(_number(match.group(1)))
            mention(f"#{numbers[-1]}")
            continue
        if (match := _NUMBER_UNIT.match(token)) and _classify(match.group(2)) is not None:
            numbers.append(_number(match.group(1)))  # "5gb", "13inch"
            token = match.group(2)
        if token in _NUMBER_WORDS:
            numbers.append(_NUMBER_WORDS[token])
            mention(f"#{numbers[-1]}")
            continue
        if token in _NEGATIONS:
            negations.append(token)
            pending_negation = True
            continue
        if token in _DIRECTION_WORDS:
            directional = True
            continue
        known = _classify(token)
        if known is None and token.startswith("un") and len(token) > 4:
            # "unopened", "unused", "unknown": a negation of the rest of the word
            rest = _classify(token[2:])
            if rest is not None:
                negations.append(token)
                pending_negation = True
                known = rest
        if known is None:
            stem = _unknown_stem(token)
            unknown.setdefault(stem, token)
            mention(stem)  # model codes ("s23"), names, places: presumed specific
            continue
        kind, concept = known
        if kind is not Kind.STOP:
            concepts.setdefault(known, token)
            mention(concept)
    if pending_negation:
        negated.add("")  # "why not?": a negation of nothing named
    return Analysis(
        numbers=tuple(numbers),
        negations=tuple(negations),
        negated=frozenset(negated),
        concepts=concepts,
        unknown=unknown,
        order=tuple(order),
        directional=directional,
    )


def _unmatched_unknown(mine: dict[str, str], theirs: dict[str, str]) -> list[str]:
    """Unknown words of one side with no equal or typo-close word on the other side."""
    out = []
    for stem, word in mine.items():
        if stem in theirs:
            continue
        limit = _typo_limit(stem)
        if limit and any(
            other[:1] == stem[:1] and _edit_distance(stem, other, limit) <= limit
            for other in theirs
        ):
            continue
        out.append(word)
    return out


def _action_key(concept: str) -> str:
    # Words at the same pole of an axis are one action ("cancel" = "stop" = "unsubscribe").
    pole = _POLE.get(concept)
    return concept if pole is None else f"axis{pole[0]}:{pole[1]}"


def _actions(side: Analysis) -> dict[str, str]:
    """action key -> word, in order of mention."""
    out: dict[str, str] = {}
    for (kind, concept), word in side.concepts.items():
        if kind is Kind.ACTION:
            out.setdefault(_action_key(concept), word)
    return out


def _unmatched(side: Analysis, other: Analysis, kinds: tuple[Kind, ...]) -> list[str]:
    theirs = {concept for (_, concept) in other.concepts}
    return [
        word
        for (kind, concept), word in side.concepts.items()
        if kind in kinds and concept not in theirs
    ]


def _quote(words: Iterable[str]) -> str:
    return ", ".join(f"'{word}'" for word in words) or "-"


def lexical_guard(*, query: str, phrasing: str) -> GuardResult:
    """Whether the two texts may be treated as the same question; the reason names why not."""
    a, b = analyse(query), analyse(phrasing)

    # 1. numbers, in order
    if a.numbers != b.numbers:
        return GuardResult(
            False, f"numbers differ: [{', '.join(a.numbers)}] vs [{', '.join(b.numbers)}]"
        )
    # 2. negation: on one side only, or negating different things
    if bool(a.negations) != bool(b.negations):
        return GuardResult(
            False, f"negation on one side only: {_quote(a.negations)} vs {_quote(b.negations)}"
        )
    if a.negated != b.negated:
        return GuardResult(
            False,
            f"negations apply to different words: {_quote(sorted(a.negated))} vs "
            f"{_quote(sorted(b.negated))}",
        )
    # 3. polarity: opposite poles of one axis, unless both sides name both
    a_words = {concept: word for (_, concept), word in a.concepts.items()}
    b_words = {concept: word for (_, concept), word in b.concepts.items()}
    for concept_a, word_a in a_words.items():
        pole_a = _POLE.get(concept_a)
        if pole_a is None or concept_a in b_words:
            continue
        for concept_b, word_b in b_words.items():
            pole_b = _POLE.get(concept_b)
            if (
                pole_b is not None
                and pole_b[0] == pole_a[0]
                and pole_b[1] != pole_a[1]
                and concept_b not in a_words
            ):
                return GuardResult(False, f"opposite meaning: '{word_a}' vs '{word_b}'")
    # 4. direction: "from X to Y" vs "from Y to X"
    if a.directional and b.directional:
        shared = [key for key in a.order if key in b.order]
        b_shared = [key for key in b.order if key in shared]
        if shared != b_shared:
            return GuardResult(
                False, f"same terms in another order: {_quote(shared)} vs {_quote(b_shared)}"
            )
    # 5. subjects: specific objects, qualifiers and unknown words must be on both sides
    a_only = _unmatched(a, b, (Kind.OBJECT, Kind.QUALIFIER)) + _unmatched_unknown(
        a.unknown, b.unknown
    )
    b_only = _unmatched(b, a, (Kind.OBJECT, Kind.QUALIFIER)) + _unmatched_unknown(
        b.unknown, a.unknown
    )
    if a_only or b_only:
        return GuardResult(False, f"different subject: {_quote(a_only)} vs {_quote(b_only)}")
    # 6. actions and soft words: one side may add some, but not swap them for others
    a_actions, b_actions = _actions(a), _actions(b)
    a_rest = [
        w for k, w in a_actions.items() if k not in b_actions and k not in _POLARITY_ONLY_KEYS
    ]
    b_rest = [
        w for k, w in b_actions.items() if k not in a_actions and k not in _POLARITY_ONLY_KEYS
    ]
    a_rest += _unmatched(a, b, (Kind.SOFT,))
    b_rest += _unmatched(b, a, (Kind.SOFT,))
    if a_rest and b_rest:
        return GuardResult(False, f"different wording: {_quote(a_rest)} vs {_quote(b_rest)}")
    # 7. the same actions in another order ("recover a deleted order" vs "delete a recovered")
    a_order = [k for k in a_actions if k in b_actions and k not in _POLARITY_ONLY_KEYS]
    b_order = [k for k in b_actions if k in a_actions and k not in _POLARITY_ONLY_KEYS]
    if a_order != b_order:
        return GuardResult(
            False,
            "actions in another order: "
            f"{_quote(a_actions[k] for k in a_order)} vs {_quote(b_actions[k] for k in b_order)}",
        )
    return GuardResult(True, "lexical guard passed")


def decide(
    *,
    query: str,
    candidates: Sequence[Candidate],
    threshold: float = CALIBRATED_THRESHOLD,
) -> MatchDecision | None:
    """The best candidate that clears the threshold and the guard; else why the best failed.

    None when there are no candidates. Candidates are tried best score first, so a near miss
    that outscores the right entry ("cancel my subscription" for "cancel my order") is vetoed
    and the right entry can still answer.
    """
    rejection: MatchDecision | None = None
    for candidate in sorted(candidates, key=lambda c: c.score, reverse=True):
        if candidate.score < threshold:
            if rejection is None:
                rejection = decision_for(
                    candidate, False, f"score {candidate.score:.3f} < threshold {threshold:.2f}"
                )
            break
        guard = lexical_guard(query=query, phrasing=candidate.phrasing)
        if guard.passed:
            return decision_for(
                candidate, True, f"score {candidate.score:.3f} >= {threshold:.2f}; {guard.reason}"
            )
        if rejection is None:
            rejection = decision_for(candidate, False, f"vetoed: {guard.reason}")
    return rejection


def decision_for(candidate: Candidate, accepted: bool, reason: str) -> MatchDecision:
    return MatchDecision(
        entry_id=candidate.entry_id,
        phrasing=candidate.phrasing,
        score=candidate.score,
        accepted=accepted,
        reason=reason,
    )
