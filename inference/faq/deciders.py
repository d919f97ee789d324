"""Which FAQ entry, if any, answers a question: the learned verifier.

Retrieval (the embedding index) proposes candidates, best cosine first; a decider says
whether one of them really asks what the question asks. `VerifierDecision` is the shipped
rule: a question that repeats one of an entry's phrasings (ignoring case, spacing and end
punctuation) is that entry's; otherwise the fine-tuned cross-encoder (`verifier.py`) scores
the best few candidates above its cosine floor and the most probable one answers if it
clears the threshold chosen on the tune split. `ExactRepeatDecision` is what a worker decides
with until its verifier is trained (`verifier_pickup.py` trains it in the background and swaps
it in): exact repeats only, never a guess.
Both are synchronous; the verifier costs milliseconds of CPU, so the cache calls it in a
thread (`off_loop`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from inference.faq.candidates import Candidate, MatchDecision, decision_for
from inference.faq.verifier import FaqVerifier

# A decider's name: the learned verifier, or exact repeats only while it is not ready.
DecisionName = Literal["verifier", "exact"]
# Phrasings the verifier scores per question (one batch): the right entry is almost always
# among the best few by cosine, and each one more costs ~1-2 ms.
MAX_SCORED = 4


class FaqDecider(Protocol):
    name: DecisionName
    off_loop: bool  # slow enough (CPU) to be called in a thread, not on the event loop

    def decide(self, *, query: str, candidates: Sequence[Candidate]) -> MatchDecision | None:
        """The accepted candidate, else a refusal naming the best one; None without any."""
        ...

    def describe(self) -> str:
        """What decides, in words an admin reads (the worker reports it with each FAQ sync)."""
        ...


class ExactRepeatDecision:
    """Before the verifier is ready: a question that repeats one of an entry's phrasings is
    that entry's; anything else goes to the model. `status` says why, and what is under way
    (set by `verifier_pickup.VerifierPickup` as training goes on)."""

    name: DecisionName = "exact"
    off_loop = False  # string comparisons

    def __init__(self, *, status: str = "the verifier is not ready") -> None:
        self.status = status

    def decide(self, *, query: str, candidates: Sequence[Candidate]) -> MatchDecision | None:
        if not candidates:
            return None
        ranked = sorted(candidates, key=lambda c: c.score, reverse=True)
        repeat = exact_repeat(query, ranked)
        if repeat is not None:
            return repeat
        return decision_for(ranked[0], False, "exact repeats only until the verifier is ready")

    def describe(self) -> str:
        return f"exact repeats of an entry's phrasings only: {self.status}"


class VerifierDecision:
    name: DecisionName = "verifier"
    off_loop = True  # a forward pass of MiniLM: milliseconds

    def __init__(self, *, verifier: FaqVerifier) -> None:
        self.verifier = verifier

    def decide(self, *, query: str, candidates: Sequence[Candidate]) -> MatchDecision | None:
        if not candidates:
            return None
        info = self.verifier.info
        ranked = sorted(candidates, key=lambda c: c.score, reverse=True)
        repeat = exact_repeat(query, ranked)
        if repeat is not None:
            return repeat
        scored = [c for c in ranked if c.score >= info.cosine_floor][:MAX_SCORED]
        if not scored:
            best = ranked[0]
            return decision_for(
                best, False, f"cosine {best.score:.3f} < floor {info.cosine_floor:.2f}"
            )
        probabilities = self.verifier.probabilities([(c.phrasing, query) for c in scored])
        probability, candidate = max(
            zip(probabilities, scored, strict=True), key=lambda pair: (pair[0], pair[1].score)
        )
        if probability >= info.threshold:
            return decision_for(
                candidate,
                True,
                f"verifier {probability:.3f} >= {info.threshold:.3f} "
                f"(cosine {candidate.score:.3f})",
            )
        best = ranked[0]
        return decision_for(
            best, False, f"verifier {probability:.3f} < {info.threshold:.3f} for the best candidate"
        )

    def describe(self) -> str:
        info = self.verifier.info
        return (
            f"the learned verifier (threshold {info.threshold:.3f}, "
            f"cosine floor {info.cosine_floor:.2f})"
        )


def exact_repeat(query: str, ranked: Sequence[Candidate]) -> MatchDecision | None:
    """The first candidate whose phrasing the question repeats (ignoring case, spacing and
    end punctuation), accepted; None if none is."""
    asked = _plain(query)
    for candidate in ranked:
        if _plain(candidate.phrasing) == asked:
            return decision_for(candidate, True, "the question repeats this phrasing")
    return None


def _plain(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip("?!. ")
