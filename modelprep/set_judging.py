"""Judging the FAQ decision on whole labelled FAQs (`labelled_sets.py`), as the product decides.

`score_sets` loads each set into its own real `FaqIndex` (entries embedded with the packaged
sentence model, as Celery does) and keeps, for every question, retrieval's candidates and the
verifier's probability for each; `decide` replays the product's decision (`entry_choice.choose`)
on them under any rule, so the rule's parameters can be chosen on the tune sets without scoring
again (`verifier_training.calibrate`), and `bench.faq_decision` reports them. A question ends:

- answered with its own entry (right) or with another entry's answer (wrong entry);
- answered although no entry is right (a false hit: a near miss or an off-topic question);
- not answered (the model answers), maybe with the right entry among the suggestions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from inference.faq.candidates import Candidate
from inference.faq.embedder import Embedder
from inference.faq.entry_choice import ChoiceRule, EntryChoice, choose
from inference.faq.index import GLOBAL_SCOPE, FaqIndex, IndexedEntry
from modelprep.labelled_sets import LabelledSet, SetQuestion

DEPTH = 5  # candidates retrieval proposes per question (FaqIndex.search_phrasings' default)
Outcome = Literal["right", "wrong_entry", "declined", "false_hit", "refused"]


class PairScorer(Protocol):
    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> list[float]: ...


@dataclass(frozen=True, slots=True)
class ScoredQuestion:
    """A question with what the decision sees: retrieval's candidates and the verifier's
    probability for each (all of them, so a rule with a lower floor can be replayed)."""

    question: SetQuestion
    candidates: tuple[Candidate, ...]
    probabilities: dict[tuple[int, str], float]  # (entry_id, phrasing) -> P(same)

    def scorer(self, query: str, chosen: Sequence[Candidate]) -> list[float]:
        return [self.probabilities[(c.entry_id, c.phrasing)] for c in chosen]


@dataclass(frozen=True, slots=True)
class ScoredSet:
    labelled: LabelledSet
    questions: tuple[ScoredQuestion, ...]

    def entry_id(self, name: str) -> int:
        return [entry.id for entry in self.labelled.entries].index(name)


def judge(question: SetQuestion, choice: EntryChoice, entry_ids: Sequence[str]) -> Outcome:
    """What the customer got: `entry_ids[i]` names the entry whose id in the index is i."""
    decision = choice.decision
    answered = entry_ids[decision.entry_id] if decision and decision.accepted else None
    if question.entry is not None:
        if answered is None:
            return "declined"
        return "right" if answered == question.entry else "wrong_entry"
    return "refused" if answered is None else "false_hit"


def suggested_right(question: SetQuestion, choice: EntryChoice, entry_ids: Sequence[str]) -> bool:
    return question.entry is not None and any(
        entry_ids[c.entry_id] == question.entry for c in choice.suggestions
    )


@dataclass
class Tally:
    """Counts of one group of questions under one rule."""

    answerable: int = 0
    right: int = 0
    wrong_entry: int = 0
    suggested_right: int = 0  # declined, but the right entry was offered
    unanswerable: int = 0
    false_hits: int = 0
    suggested_unanswerable: int = 0  # suggestions shown for a question no entry answers

    def add(self, question: SetQuestion, choice: EntryChoice, entry_ids: Sequence[str]) -> None:
        outcome = judge(question, choice, entry_ids)
        if question.entry is not None:
            self.answerable += 1
            self.right += outcome == "right"
            self.wrong_entry += outcome == "wrong_entry"
            self.suggested_right += suggested_right(question, choice, entry_ids)
        else:
            self.unanswerable += 1
            self.false_hits += outcome == "false_hit"
            self.suggested_unanswerable += bool(choice.suggestions)


def decide(scored: ScoredQuestion, rule: ChoiceRule) -> EntryChoice:
    return choose(
        query=scored.question.text, candidates=scored.candidates, scorer=scored.scorer, rule=rule
    )


def tallies(sets: Sequence[ScoredSet], rule: ChoiceRule) -> dict[tuple[str, str], Tally]:
    """(set name or "all", kind or "all") -> tally."""
    out: dict[tuple[str, str], Tally] = {}
    for scored_set in sets:
        ids = [entry.id for entry in scored_set.labelled.entries]
        for scored in scored_set.questions:
            choice = decide(scored, rule)
            for group in (scored_set.labelled.name, "all"):
                for kind in (scored.question.kind, "all"):
                    out.setdefault((group, kind), Tally()).add(scored.question, choice, ids)
    return out


def score_sets(
    sets: Sequence[LabelledSet], *, embedder: Embedder, verifier: PairScorer
) -> list[ScoredSet]:
    """Each set in its own index, each question's candidates and their probabilities."""
    out = []
    for labelled in sets:
        index = FaqIndex()
        vectors = embedder.encode([entry.question for entry in labelled.entries])
        for number, entry in enumerate(labelled.entries):
            index.upsert(
                IndexedEntry(
                    entry_id=number,
                    scope=GLOBAL_SCOPE,
                    answer=entry.answer,
                    phrasings=[entry.question],
                    vectors=vectors[number : number + 1].copy(),
                )
            )
        asked = embedder.encode([q.text for q in labelled.questions])
        scored = []
        for question, vector in zip(labelled.questions, asked, strict=True):
            candidates = tuple(
                index.search_phrasings(query_vector=vector, scopes=[GLOBAL_SCOPE], top_k=DEPTH)
            )
            found = verifier.probabilities([(c.phrasing, question.text) for c in candidates])
            scored.append(
                ScoredQuestion(
                    question=question,
                    candidates=candidates,
                    probabilities={
                        (c.entry_id, c.phrasing): p for c, p in zip(candidates, found, strict=True)
                    },
                )
            )
        out.append(ScoredSet(labelled=labelled, questions=tuple(scored)))
    return out
