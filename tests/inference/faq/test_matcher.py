"""The FAQ decision rule: lexical guard vetoes (with reasons) and the threshold edge."""

from __future__ import annotations

import pytest

from inference.faq.matcher import (
    CALIBRATED_THRESHOLD,
    Candidate,
    analyse,
    decide,
    lexical_guard,
)


def vetoed(query: str, phrasing: str) -> str:
    result = lexical_guard(query=query, phrasing=phrasing)
    assert not result.passed, f"{query!r} vs {phrasing!r} passed the guard"
    return result.reason


def passes(query: str, phrasing: str) -> None:
    result = lexical_guard(query=query, phrasing=phrasing)
    assert result.passed, f"{query!r} vs {phrasing!r}: {result.reason}"


# --- vetoes ----------------------------------------------------------------------------------


def test_password_vs_router_names_both_words() -> None:
    reason = vetoed("How do I reset my password?", "How do I reset my router?")
    assert reason.startswith("different subject")
    assert "'password'" in reason
    assert "'router'" in reason


def test_cancel_subscription_vs_cancel_order() -> None:
    reason = vetoed("How do I cancel my subscription?", "How do I cancel my order?")
    assert "'subscription'" in reason
    assert "'order'" in reason


@pytest.mark.parametrize(
    ("query", "phrasing"),
    [
        ("How do I turn on notifications?", "How do I turn off notifications?"),
        ("How do I enable two-factor authentication?", "How do I disable 2FA?"),
        ("How do I start my subscription?", "How do I stop my subscription?"),
        ("How do I open a support ticket?", "How do I close a support ticket?"),
        ("How do I add an item to my cart?", "How do I remove an item from my cart?"),
        ("How do I increase my credit limit?", "How do I decrease my credit limit?"),
        ("How do I upgrade my plan?", "How do I downgrade my plan?"),
        ("How do I lock my card?", "How do I unlock my card?"),
        ("How do I log in?", "How do I log out?"),
        ("How do I subscribe to the newsletter?", "How do I unsubscribe from the newsletter?"),
        ("How do I pause my subscription?", "How do I resume my subscription?"),
    ],
)
def test_opposite_poles_veto(query: str, phrasing: str) -> None:
    assert vetoed(query, phrasing).startswith("opposite meaning")


def test_turn_on_off_reason_is_explainable() -> None:
    reason = vetoed("How do I turn on auto-renewal?", "How do I turn off auto-renewal?")
    assert reason == "opposite meaning: 'on_power' vs 'off_power'"


@pytest.mark.parametrize(
    ("query", "phrasing"),
    [
        ("My package was delivered", "My package was not delivered"),
        ("I want to receive marketing emails", "I don't want to receive marketing emails"),
        ("I can see my order history", "I can't see my order history"),
        ("Can I get a refund with a receipt?", "Can I get a refund without a receipt?"),
        ("Can I return opened items?", "Can I return unopened items?"),
        ("My payment went through", "My payment never went through"),
    ],
)
def test_negation_on_one_side_vetoes(query: str, phrasing: str) -> None:
    assert vetoed(query, phrasing).startswith("negation on one side only")


def test_negations_of_different_things_veto() -> None:
    reason = vetoed("My SIM is not detected", "My SIM is detected but has no signal")
    assert reason.startswith("negations apply to different words")


@pytest.mark.parametrize(
    ("query", "phrasing", "numbers"),
    [
        ("Why was I charged $10?", "Why was I charged $100?", "[10] vs [100]"),
        ("Is there a 10% discount?", "Is there a 20% discount?", "[10] vs [20]"),
        (
            "Does the plan include 5GB of data?",
            "Does the plan include 50 GB of data?",
            "[5] vs [50]",
        ),
        ("Why was I charged twice?", "Why was I charged three times?", "[2] vs [3]"),
        (
            "I was charged 9.99 instead of 4.99",
            "I was charged 4.99 instead of 9.99",
            "[9.99, 4.99] vs [4.99, 9.99]",
        ),
        ("Refund for a $5 order?", "Refund for a $5,000 order?", "[5] vs [5000]"),
        ("Can I add a 4th user?", "Can I add a 6th user?", "[4] vs [6]"),
        ("Is the warranty valid for a year?", "Is the warranty valid for 2 years?", "[] vs [2]"),
    ],
)
def test_numbers_must_match_exactly(query: str, phrasing: str, numbers: str) -> None:
    assert vetoed(query, phrasing) == f"numbers differ: {numbers}"


def test_same_amount_in_other_words_passes() -> None:
    passes("Why was I charged 10 dollars?", "Why did you charge me $10?")
    passes("Why was I charged twice?", "Why was I double charged?")


@pytest.mark.parametrize(
    ("query", "phrasing"),
    [
        ("How much is the Basic plan?", "How much is the Premium plan?"),
        (
            "Is the Galaxy S23 compatible with this charger?",
            "Is the Galaxy S24 compatible with this charger?",
        ),
        ("How do I log in with Google?", "How do I log in with Facebook?"),
        ("Do you ship to Canada?", "Do you ship to Mexico?"),
        ("Do you sell the black version?", "Do you sell the red version?"),
        ("How do I reset my router?", "How do I reset my thermostat?"),  # unknown word
    ],
)
def test_products_qualifiers_and_unknown_names_veto(query: str, phrasing: str) -> None:
    assert vetoed(query, phrasing).startswith("different subject")


def test_direction_of_a_change_matters() -> None:
    reason = vetoed(
        "Can I upgrade from the Family plan to the Business plan?",
        "Can I upgrade from the Business plan to the Family plan?",
    )
    assert reason.startswith("same terms in another order")


def test_different_actions_on_the_same_thing_veto() -> None:
    assert vetoed("How do I track my order?", "How do I cancel my order?").startswith(
        "different wording"
    )
    assert vetoed("Can I pause my subscription?", "Can I cancel my subscription?")
    assert vetoed("How do I pay my bill?", "How do I view my bill?")


def test_soft_word_swaps_veto() -> None:
    assert vetoed("Is the item new?", "Is the item used?").startswith("different wording")
    assert vetoed("How do I allow cookies?", "How do I block cookies?")


def test_same_actions_in_another_order_veto() -> None:
    reason = vetoed("How do I recover a deleted order?", "How do I delete a recovered order?")
    assert reason.startswith("actions in another order")


# --- what must still pass ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "phrasing"),
    [
        ("How do I reset my password?", "I forgot my password, how can I reset it?"),
        ("pls reset my pasword", "How do I reset my password?"),  # typo, politeness
        ("How do I cancel my subscripton?", "How do I cancel my subscription?"),
        ("I can't log in to my account", "I am unable to sign in to my account"),
        ("How do I cancel my subscription?", "I want to stop my subscription"),
        ("How do I cancel my subscription?", "How do I end my membership?"),
        ("How do I turn off auto-renewal?", "How can I disable automatic renewal?"),
        ("Reset password", "password reset"),
        ("Where is my order?", "Can you tell me where my order is right now?"),
        ("How do I track my package?", "how can i track my parcel"),
        ("Hello! I'd like to know how to cancel my subscription, thanks.", "cancel subscription"),
        ("I didn't receive the password reset email", "The password reset email never arrived"),
        (
            "Can I return an item after 30 days?",
            "Is it possible to send something back after 30 days?",
        ),
    ],
)
def test_paraphrases_pass(query: str, phrasing: str) -> None:
    passes(query, phrasing)


@pytest.mark.parametrize(
    ("query", "phrasing"),
    [
        ("How do I reset my password?", "How do I reset my router?"),
        ("How do I turn on notifications?", "How do I turn off notifications?"),
        ("Why was I charged $10?", "Why was I charged $100?"),
        ("How do I reset my password?", "I forgot my password, how can I reset it?"),
        ("My package was delivered", "My package was not delivered"),
        ("Can I port my number to you?", "Can I port my number away from you?"),
        ("Can I pay with PayPal?", "Do you accept PayPal?"),
    ],
)
def test_guard_is_symmetric(query: str, phrasing: str) -> None:
    forward = lexical_guard(query=query, phrasing=phrasing)
    backward = lexical_guard(query=phrasing, phrasing=query)
    assert forward.passed == backward.passed


def test_analysis_normalises_contractions_terms_and_currency() -> None:
    analysis = analyse("I can't log in, I paid €20 for the gift card")
    assert analysis.negations == ("not",)
    assert analysis.numbers == ("20",)
    concepts = {concept for (_, concept) in analysis.concepts}
    assert {"login", "pay", "eur", "gift_card"} <= concepts
    assert "card" not in concepts  # "gift card" is its own thing


# --- decide() --------------------------------------------------------------------------------


def test_no_candidates_is_none() -> None:
    assert decide(query="anything", candidates=[]) is None


def test_threshold_edge_is_inclusive() -> None:
    query = "How do I reset my password?"
    at = decide(
        query=query,
        candidates=[Candidate(entry_id=1, phrasing="Reset password", score=0.7)],
        threshold=0.7,
    )
    assert at is not None
    assert at.accepted
    below = decide(
        query=query,
        candidates=[Candidate(entry_id=1, phrasing="Reset password", score=0.6999)],
        threshold=0.7,
    )
    assert below is not None
    assert not below.accepted
    assert below.reason == "score 0.700 < threshold 0.70"


def test_default_threshold_is_the_calibrated_one() -> None:
    phrasing = "Reset password"
    query = "How do I reset my password?"
    just_below = CALIBRATED_THRESHOLD - 1e-6
    low = decide(
        query=query, candidates=[Candidate(entry_id=1, phrasing=phrasing, score=just_below)]
    )
    high = decide(
        query=query,
        candidates=[Candidate(entry_id=1, phrasing=phrasing, score=CALIBRATED_THRESHOLD)],
    )
    assert low is not None
    assert not low.accepted
    assert high is not None
    assert high.accepted
    assert 0.5 <= CALIBRATED_THRESHOLD <= 0.95


def test_vetoed_best_candidate_lets_the_right_entry_answer() -> None:
    decision = decide(
        query="How do I cancel my order?",
        candidates=[
            Candidate(entry_id=2, phrasing="How do I cancel my order?", score=0.86),
            Candidate(entry_id=1, phrasing="How do I cancel my subscription?", score=0.9),
        ],
        threshold=0.7,
    )
    assert decision is not None
    assert decision.accepted
    assert decision.entry_id == 2
    assert decision.phrasing == "How do I cancel my order?"
    assert decision.score == 0.86


def test_all_vetoed_reports_the_best_candidates_reason() -> None:
    decision = decide(
        query="How do I reset my router?",
        candidates=[
            Candidate(entry_id=1, phrasing="How do I reset my password?", score=0.8),
            Candidate(entry_id=2, phrasing="How do I reset my PIN?", score=0.75),
            Candidate(entry_id=3, phrasing="Reset my router", score=0.5),
        ],
        threshold=0.7,
    )
    assert decision is not None
    assert not decision.accepted
    assert decision.entry_id == 1
    assert decision.reason.startswith("vetoed: different subject")
    assert "'router'" in decision.reason


def test_accepted_reason_mentions_score_and_guard() -> None:
    decision = decide(
        query="how can i track my parcel",
        candidates=[Candidate(entry_id=5, phrasing="How do I track my package?", score=0.91)],
        threshold=0.7,
    )
    assert decision is not None
    assert decision.accepted
    assert decision.reason == "score 0.910 >= 0.70; lexical guard passed"
