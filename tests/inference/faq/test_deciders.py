"""The verifier decision: which candidates it scores, which one answers, what a refusal names."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from inference.faq.candidates import Candidate, MatchDecision
from inference.faq.deciders import ExactRepeatDecision, VerifierDecision
from inference.faq.entry_choice import MAX_SCORED
from inference.faq.verifier import FaqVerifier, VerifierInfo


def info(*, threshold: float = 0.9, floor: float = 0.5, margin: float = 2.0) -> VerifierInfo:
    return VerifierInfo(
        threshold=threshold,
        cosine_floor=floor,
        margin=margin,
        suggest_at=0.5,
        false_hit_bound=0.01,
        tune_recall=0.5,
        tune_false_hits=0,
        tune_near_misses=10,
        tune_sets_recall=0.5,
        tune_sets_wrong_entry=0,
        tune_sets_false_hits=0,
        seed=0,
        train_pairs=1,
        train_sets=0,
        train_examples=2,
        epochs_run=1,
        train_s=1.0,
        pairs_sha256="0" * 64,
    )


class ScriptedVerifier(FaqVerifier):
    """A verifier whose probabilities are given per user question and entry phrasing."""

    def __init__(self, folder: Path, probabilities: dict[str, float], **kwargs: float) -> None:
        folder.mkdir(exist_ok=True)
        info(**kwargs).write(folder)
        super().__init__(model_dir=folder)
        self.scripted = probabilities
        self.asked: list[list[tuple[str, str]]] = []

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        self.asked.append(list(pairs))
        return [self.scripted[phrasing] for phrasing, _ in pairs]


def candidate(entry_id: int, phrasing: str, score: float) -> Candidate:
    return Candidate(entry_id=entry_id, phrasing=phrasing, score=score)


def decided(verifier: FaqVerifier, *, query: str, candidates: Sequence[Candidate]) -> MatchDecision:
    """What a VerifierDecision on `verifier` decides for `query`: there must be a decision."""
    choice = VerifierDecision(verifier=verifier).decide(query=query, candidates=candidates)
    assert choice.decision is not None
    return choice.decision


def test_the_most_probable_candidate_answers_even_if_another_has_a_higher_cosine(
    tmp_path: Path,
) -> None:
    verifier = ScriptedVerifier(tmp_path, {"cancel subscription": 0.30, "cancel order": 0.97})
    decision = decided(
        verifier,
        query="how do i cancel my order",
        candidates=[
            candidate(1, "cancel subscription", 0.81),
            candidate(2, "cancel order", 0.78),
        ],
    )
    assert decision.accepted
    assert (decision.entry_id, decision.phrasing) == (2, "cancel order")
    assert verifier.asked == [
        [
            ("cancel subscription", "how do i cancel my order"),
            ("cancel order", "how do i cancel my order"),
        ]
    ]


def test_a_refusal_names_the_closest_entry_so_the_admin_can_be_shown_it(tmp_path: Path) -> None:
    verifier = ScriptedVerifier(tmp_path, {"ship to canada": 0.89, "ship to mexico": 0.2})
    decision = decided(
        verifier,
        query="do you ship from canada",
        candidates=[candidate(5, "ship to mexico", 0.70), candidate(4, "ship to canada", 0.93)],
    )
    assert not decision.accepted
    assert (decision.entry_id, decision.score) == (4, 0.93)
    assert "0.890 < 0.900" in decision.reason


def test_candidates_below_the_cosine_floor_are_never_scored(tmp_path: Path) -> None:
    verifier = ScriptedVerifier(tmp_path, {"opening hours": 0.99}, floor=0.5)
    decision = decided(
        verifier, query="my parcel is damaged", candidates=[candidate(1, "opening hours", 0.49)]
    )
    assert not decision.accepted
    assert "floor" in decision.reason
    assert verifier.asked == []


def test_only_the_best_few_by_cosine_are_scored_in_one_batch(tmp_path: Path) -> None:
    phrasings = {f"phrasing {i}": 0.1 for i in range(10)}
    verifier = ScriptedVerifier(tmp_path, phrasings)
    VerifierDecision(verifier=verifier).decide(
        query="q", candidates=[candidate(i, f"phrasing {i}", 0.60 + i / 100) for i in range(10)]
    )
    assert len(verifier.asked) == 1
    assert [p for p, _ in verifier.asked[0]] == [
        f"phrasing {i}" for i in range(9, 9 - MAX_SCORED, -1)
    ]


def test_no_candidates_is_no_decision(tmp_path: Path) -> None:
    verifier = ScriptedVerifier(tmp_path, {})
    assert VerifierDecision(verifier=verifier).decide(query="q", candidates=[]).decision is None


def test_a_probability_at_the_threshold_is_accepted(tmp_path: Path) -> None:
    verifier = ScriptedVerifier(tmp_path, {"reset password": 0.9}, threshold=0.9)
    decision = decided(
        verifier, query="forgot my password", candidates=[candidate(1, "reset password", 0.8)]
    )
    assert decision.accepted


def test_a_repeat_of_a_phrasing_is_that_entry_without_asking_the_model(tmp_path: Path) -> None:
    verifier = ScriptedVerifier(tmp_path, {"Where is my parcel?": 0.0, "Track my order": 0.0})
    decision = decided(
        verifier,
        query="  where is my   PARCEL ",
        candidates=[
            candidate(1, "Track my order", 0.90),
            candidate(2, "Where is my parcel?", 0.88),
        ],
    )
    assert decision.accepted
    assert decision.entry_id == 2
    assert verifier.asked == []


def test_before_the_verifier_is_ready_only_an_exact_repeat_is_answered() -> None:
    decider = ExactRepeatDecision(status="training: epoch 1/4")
    candidates = [candidate(1, "How do I reset my password?", 0.93)]
    repeat = decider.decide(query="how do I reset my password", candidates=candidates).decision
    assert repeat is not None
    assert repeat.accepted
    assert repeat.entry_id == 1
    paraphrase = decider.decide(
        query="I forgot my password, what now?", candidates=candidates
    ).decision
    assert paraphrase is not None
    assert not paraphrase.accepted  # a near-certain paraphrase still goes to the model
    assert paraphrase.entry_id == 1  # ... named, so it can be suggested as a phrasing
    assert decider.describe() == ("exact repeats of an entry's phrasings only: training: epoch 1/4")
    assert decider.decide(query="anything", candidates=[]).decision is None


def test_two_likely_entries_answer_neither_and_are_offered(tmp_path: Path) -> None:
    """Issue 30: 0.979 for the password reset and 0.977 for deleting the account; the old
    rule answered with the higher, the wrong one."""
    verifier = ScriptedVerifier(
        tmp_path,
        {"How do I reset my password?": 0.979, "How do I delete my account?": 0.977},
        threshold=0.975,
        margin=1.0,
    )
    choice = VerifierDecision(verifier=verifier).decide(
        query="I want to close my account permanently",
        candidates=[
            candidate(1, "How do I reset my password?", 0.62),
            candidate(2, "How do I delete my account?", 0.61),
        ],
    )
    assert choice.decision is not None
    assert not choice.decision.accepted
    assert [s.entry_id for s in choice.suggestions] == [1, 2]
    assert "margin 1.0 log-odds" in VerifierDecision(verifier=verifier).describe()
