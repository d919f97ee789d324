"""The FAQ entries a question might ask, and the decision on them.

Retrieval (`index.py`) proposes a `Candidate` per phrasing of the best entries, best cosine
first; a decider (`deciders.py`) says which one, if any, answers the question, as a
`MatchDecision` that names the candidate it accepted, or the one it refused and why.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Candidate:
    """One phrasing of an FAQ entry and its cosine with the question (unit vectors)."""

    entry_id: int
    phrasing: str
    score: float


@dataclass(frozen=True, slots=True)
class MatchDecision:
    """A decider's verdict on one candidate: accepted (it answers) or refused, and why."""

    entry_id: int
    phrasing: str
    score: float
    accepted: bool
    reason: str


def decision_for(candidate: Candidate, accepted: bool, reason: str) -> MatchDecision:
    return MatchDecision(
        entry_id=candidate.entry_id,
        phrasing=candidate.phrasing,
        score=candidate.score,
        accepted=accepted,
        reason=reason,
    )
