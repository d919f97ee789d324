"""The decision among an FAQ's candidates: the best entry answers only when it is clearly
ahead of every other entry; when unsure, nothing is guessed and the likely entries are offered."""

from __future__ import annotations

from collections.abc import Sequence

from inference.faq.candidates import Candidate, MatchDecision
from inference.faq.entry_choice import ChoiceRule, EntryChoice, choose, log_odds

RULE = ChoiceRule(threshold=0.95, margin=2.0, cosine_floor=0.45, suggest_at=0.5)
RESET = Candidate(entry_id=1, phrasing="How do I reset my password?", score=0.62)
DELETE = Candidate(entry_id=2, phrasing="How do I delete my account?", score=0.60)
EMAIL = Candidate(entry_id=3, phrasing="How do I change my email?", score=0.50)


class Scripted:
    """Probabilities per phrasing; records what it was asked to score."""

    def __init__(self, probabilities: dict[str, float]) -> None:
        self.probabilities = probabilities
        self.calls: list[list[str]] = []

    def __call__(self, query: str, chosen: Sequence[Candidate]) -> list[float]:
        self.calls.append([c.phrasing for c in chosen])
        return [self.probabilities[c.phrasing] for c in chosen]


def decide(
    query: str, probabilities: dict[Candidate, float], *, rule: ChoiceRule = RULE
) -> EntryChoice:
    """`choose` among the candidates of `probabilities`, in its order, each scored as given."""
    scorer = Scripted({c.phrasing: p for c, p in probabilities.items()})
    return choose(query=query, candidates=list(probabilities), scorer=scorer, rule=rule)


def accepted(choice: EntryChoice) -> MatchDecision:
    assert choice.decision is not None
    assert choice.decision.accepted, choice.decision.reason
    return choice.decision


def refused(choice: EntryChoice) -> MatchDecision:
    assert choice.decision is not None
    assert not choice.decision.accepted, choice.decision.reason
    return choice.decision


def test_two_entries_both_likely_is_unsure_and_offers_both() -> None:
    # issue 30: 0.979 for reset-password, 0.977 for delete-account: the old rule took the
    # higher, the wrong one
    choice = decide(
        "I want to close my account permanently", {RESET: 0.979, DELETE: 0.977, EMAIL: 0.01}
    )
    assert "unsure" in refused(choice).reason
    assert [c.entry_id for c in choice.suggestions] == [RESET.entry_id, DELETE.entry_id]


def test_a_clear_winner_answers() -> None:
    choice = decide("I want my account gone for good", {RESET: 0.02, DELETE: 0.99, EMAIL: 0.001})
    assert accepted(choice).entry_id == DELETE.entry_id
    assert choice.suggestions == ()


def test_the_margin_is_in_log_odds_against_the_runner_up() -> None:
    probabilities = {RESET: 0.99, DELETE: 0.9}  # lead: 4.6 - 2.2 = 2.4
    accepted(decide("q", probabilities))
    stricter = ChoiceRule(threshold=0.95, margin=2.5, cosine_floor=0.45, suggest_at=0.5)
    refused(decide("q", probabilities, rule=stricter))
    assert round(log_odds(0.99) - log_odds(0.9), 2) == 2.4


def test_below_the_threshold_nothing_answers_and_only_likely_entries_are_offered() -> None:
    choice = decide("q", {RESET: 0.7, DELETE: 0.2})
    refused(choice)
    assert [c.entry_id for c in choice.suggestions] == [RESET.entry_id]


def test_phrasings_of_one_entry_are_not_each_others_runner_up() -> None:
    alternate = Candidate(entry_id=DELETE.entry_id, phrasing="Close my account", score=0.58)
    choice = decide("close my account for good", {DELETE: 0.97, alternate: 0.99, RESET: 0.01})
    assert accepted(choice).entry_id == DELETE.entry_id


def test_an_exact_repeat_answers_without_scoring() -> None:
    scorer = Scripted({})
    choice = choose(
        query="how do I DELETE my account", candidates=[RESET, DELETE], scorer=scorer, rule=RULE
    )
    assert accepted(choice).entry_id == DELETE.entry_id
    assert scorer.calls == []


def test_only_candidates_above_the_floor_are_scored_and_at_most_max_scored() -> None:
    low = Candidate(entry_id=9, phrasing="Do you sell hats?", score=0.2)
    many = [Candidate(entry_id=10 + i, phrasing=f"q{i}", score=0.9 - i / 100) for i in range(6)]
    scorer = Scripted({c.phrasing: 0.0 for c in [*many, low]})
    choose(query="x", candidates=[low, *many], scorer=scorer, rule=RULE)
    assert scorer.calls == [[c.phrasing for c in many[: RULE.max_scored]]]
    nothing = Scripted({})
    choice = choose(query="x", candidates=[low], scorer=nothing, rule=RULE)
    assert nothing.calls == []
    assert "floor" in refused(choice).reason


def test_no_candidates_no_decision() -> None:
    assert decide("q", {}).decision is None
