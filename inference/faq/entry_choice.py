"""Which entry of the FAQ, if any, a question asks: a decision among all the candidates.

Retrieval proposes candidates (each entry's best phrasing by embedding cosine, best first);
the verifier gives each of the best few above the cosine floor P(this phrasing asks what the
question asks). Judging each pair alone is not enough: a question can look like two entries
("I want to close my account permanently" scored 0.979 against "How do I reset my password?"
and 0.977 against "How do I delete my account?"), and the higher one is then a coin toss. So
the best entry answers only when its probability clears the threshold **and** it leads the
best *other* entry by a margin in log-odds; when it does not, nothing is guessed: the model
answers and the entries the verifier found likely are offered as suggestions ("Did you
mean ...?"), which a customer clicks to get that entry's answer at once.

Pure: the probabilities come from a function the caller passes (the verifier, or a bench's
cached scores), so the worker and the benchmark decide with this same code.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from inference.faq.candidates import Candidate, MatchDecision, decision_for

# P(same question) for each (candidate phrasing, the question)
Scorer = Callable[[str, Sequence[Candidate]], Sequence[float]]
MAX_SUGGESTIONS = 2
# phrasings the verifier scores per question (one batch): the right entry is almost always
# among the best few by cosine, and each one more costs ~1-2 ms of CPU
MAX_SCORED = 4
_EDGE = 1e-6  # probabilities are clipped to [EDGE, 1 - EDGE] before taking log-odds


@dataclass(frozen=True, slots=True)
class ChoiceRule:
    threshold: float  # the best entry's probability must reach this ...
    margin: float  # ... and lead the runner-up entry's by this much, in log-odds
    cosine_floor: float  # candidates below this cosine are not scored at all
    suggest_at: float  # an entry this probable is offered when nothing is answered
    max_scored: int = MAX_SCORED

    def describe(self) -> str:
        return (
            f"threshold {self.threshold:.4f}, margin {self.margin:.1f} log-odds over the "
            f"runner-up, cosine floor {self.cosine_floor:.2f}"
        )


@dataclass(frozen=True, slots=True)
class EntryChoice:
    """The decision (accepted, or refused naming the best candidate by cosine; None without
    candidates) and, when refused, the entries to offer as suggestions, most likely first."""

    decision: MatchDecision | None
    suggestions: tuple[Candidate, ...] = field(default=())


def exact_repeat_else(
    query: str,
    candidates: Sequence[Candidate],
    judge: Callable[[Sequence[Candidate]], EntryChoice],
) -> EntryChoice:
    """What every decision does first: no candidates, no decision; a question that repeats one
    of their phrasings, that entry (`exact_repeat`); else what `judge` makes of the candidates,
    best cosine first."""
    if not candidates:
        return EntryChoice(None)
    ranked = sorted(candidates, key=lambda c: c.score, reverse=True)
    repeat = exact_repeat(query, ranked)
    if repeat is not None:
        return EntryChoice(repeat)
    return judge(ranked)


def choose(
    *, query: str, candidates: Sequence[Candidate], scorer: Scorer, rule: ChoiceRule
) -> EntryChoice:
    return exact_repeat_else(
        query, candidates, lambda ranked: _verified(query, ranked, scorer=scorer, rule=rule)
    )


def _verified(
    query: str, ranked: Sequence[Candidate], *, scorer: Scorer, rule: ChoiceRule
) -> EntryChoice:
    """The verifier's decision among `ranked` (best cosine first; the question repeats none of
    their phrasings)."""
    best_by_cosine = ranked[0]
    scored = [c for c in ranked if c.score >= rule.cosine_floor][: rule.max_scored]
    if not scored:
        why = f"cosine {best_by_cosine.score:.3f} < floor {rule.cosine_floor:.2f}"
        return EntryChoice(decision_for(best_by_cosine, False, why))
    by_entry = best_per_entry(scored, scorer(query, scored))
    (best, p_best), *others = by_entry
    p_next = others[0][1] if others else 0.0
    lead = log_odds(p_best) - log_odds(p_next)
    if p_best >= rule.threshold and lead >= rule.margin:
        why = (
            f"verifier {p_best:.3f} >= {rule.threshold:.3f}, {lead:.1f} log-odds ahead of the "
            f"runner-up (cosine {best.score:.3f})"
        )
        return EntryChoice(decision_for(best, True, why))
    if p_best >= rule.threshold:
        why = f"unsure: verifier {p_best:.3f}, only {lead:.1f} log-odds ahead of {p_next:.3f}"
    else:
        why = f"verifier {p_best:.3f} < {rule.threshold:.3f} for the best candidate"
    suggestions = tuple(c for c, p in by_entry[:MAX_SUGGESTIONS] if p >= rule.suggest_at)
    return EntryChoice(decision_for(best_by_cosine, False, why), suggestions)


def best_per_entry(
    scored: Sequence[Candidate], probabilities: Sequence[float]
) -> list[tuple[Candidate, float]]:
    """Each entry's most probable phrasing, most probable entry first (ties: higher cosine)."""
    best: dict[int, tuple[Candidate, float]] = {}
    for candidate, probability in zip(scored, probabilities, strict=True):
        held = best.get(candidate.entry_id)
        if held is None or (probability, candidate.score) > (held[1], held[0].score):
            best[candidate.entry_id] = (candidate, float(probability))
    return sorted(best.values(), key=lambda pair: (pair[1], pair[0].score), reverse=True)


def log_odds(probability: float) -> float:
    p = min(1.0 - _EDGE, max(_EDGE, probability))
    return math.log(p / (1.0 - p))


def exact_repeat(query: str, ranked: Sequence[Candidate]) -> MatchDecision | None:
    """The first candidate whose phrasing the question repeats (ignoring case, spacing and
    end punctuation), accepted; None if none is."""
    asked = plain(query)
    for candidate in ranked:
        if plain(candidate.phrasing) == asked:
            return decision_for(candidate, True, "the question repeats this phrasing")
    return None


def plain(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip("?!. ")
