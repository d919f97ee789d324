"""Which FAQ entry, if any, answers a question: the learned verifier, or exact repeats only.

Retrieval (the embedding index) proposes candidates, best cosine first; a decider says which
entry, if any, the question asks. `VerifierDecision` is the shipped rule
(`entry_choice.choose`): a question that repeats one of an entry's phrasings (ignoring case,
spacing and end punctuation) is that entry's; otherwise the learned verifier
(`verifier.py`) scores the best few candidates above its cosine floor and the most probable
entry answers if it clears the threshold *and* leads every other entry by the margin (all
three chosen on the tune data: `verifier_training.choose_rule`); when it does not, the likely
entries come back as suggestions. `ExactRepeatDecision` is what a worker decides with until
its verifier is trained (`verifier_pickup.py` trains it in the background and swaps it in):
exact repeats only, never a guess.
Both are synchronous; the verifier costs milliseconds of CPU, so the cache calls it in a
thread (`off_loop`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from inference.faq.candidates import Candidate, decision_for
from inference.faq.entry_choice import ChoiceRule, EntryChoice, choose, exact_repeat_else
from inference.faq.verifier import FaqVerifier

# A decider's name: the learned verifier, or exact repeats only while it is not ready.
DecisionName = Literal["verifier", "exact"]


class FaqDecider(Protocol):
    name: DecisionName
    off_loop: bool  # slow enough (CPU) to be called in a thread, not on the event loop

    def decide(self, *, query: str, candidates: Sequence[Candidate]) -> EntryChoice:
        """The accepted candidate, else a refusal naming the best one (and the entries to
        suggest); a decision of None without candidates."""
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

    def decide(self, *, query: str, candidates: Sequence[Candidate]) -> EntryChoice:
        return exact_repeat_else(query, candidates, _refused_until_verifier_ready)

    def describe(self) -> str:
        return f"exact repeats of an entry's phrasings only: {self.status}"


def _refused_until_verifier_ready(ranked: Sequence[Candidate]) -> EntryChoice:
    why = "exact repeats only until the verifier is ready"
    return EntryChoice(decision_for(ranked[0], False, why))


class VerifierDecision:
    name: DecisionName = "verifier"
    off_loop = True  # a forward pass of MiniLM: milliseconds

    def __init__(self, *, verifier: FaqVerifier) -> None:
        self.verifier = verifier
        self.rule = verifier.info.rule()

    def decide(self, *, query: str, candidates: Sequence[Candidate]) -> EntryChoice:
        return choose(query=query, candidates=candidates, scorer=self._score, rule=self.rule)

    def _score(self, query: str, candidates: Sequence[Candidate]) -> list[float]:
        return self.verifier.probabilities([(c.phrasing, query) for c in candidates])

    def describe(self) -> str:
        return f"the learned verifier ({self.rule.describe()})"


__all__ = ["ChoiceRule", "EntryChoice", "ExactRepeatDecision", "FaqDecider", "VerifierDecision"]
