"""The verifier `make test` prepared (the one that ships) behaves as its metadata says."""

from __future__ import annotations

from inference.faq.embedder import shared_embedder
from inference.faq.verifier import FaqVerifier
from modelprep.labelled_pairs import load_pairs, of_split
from modelprep.labelled_sets import load_sets
from modelprep.set_judging import decide, judge, score_sets, tallies
from modelprep.verifier_training import MARGINS, allowed_false_hits
from tests.support.faq import prepared_verifier

__all__ = ["prepared_verifier"]


def test_its_threshold_keeps_the_tune_false_hits_within_the_stated_bound(
    prepared_verifier: FaqVerifier,
) -> None:
    info = prepared_verifier.info
    near_misses = sum(not p.same for p in of_split(load_pairs(), "tune"))
    assert info.tune_near_misses == near_misses
    assert info.tune_false_hits <= allowed_false_hits(near_misses, info.false_hit_bound)
    assert info.tune_recall > 0.0


def test_an_entry_asked_again_almost_word_for_word_is_answered_or_offered(
    prepared_verifier: FaqVerifier,
) -> None:
    # entries it was not trained on; the first recipe scored even exact repeats at 0.002
    # (exact ones the decision takes without the model: test_deciders). Recipe 9 accepted 58
    # of these 60, recipe 11 49 (trained on an AMD EPYC); recipe 12, the same on every CPU,
    # accepts 13: its scores are 0.98-0.99999 against a threshold of 0.9999, the price of a
    # rule that answered 1 held-out question in 1,214 with another entry's answer (recipe 11:
    # 2 to 10 by CPU; docs/faq.md). None is lost: every one is offered as "Did you mean".
    entries = sorted({p.a for p in of_split(load_pairs(), "heldout")})[:60]
    asked = [(e, e.rstrip("?.!") + " please") for e in entries]
    probabilities = prepared_verifier.probabilities(asked)
    accepted = [p >= prepared_verifier.info.threshold for p in probabilities]
    assert sum(accepted) >= 0.2 * len(entries), list(zip(asked, probabilities, strict=True))
    assert min(probabilities) >= prepared_verifier.info.suggest_at
    repeats = prepared_verifier.probabilities([(e, e) for e in entries])
    assert sorted(repeats)[len(repeats) // 2] >= 0.99


def test_clear_paraphrases_score_above_one_word_changes_which_never_pass(
    prepared_verifier: FaqVerifier,
) -> None:
    same = [
        ("How do I reset my password?", "how can I reset my password"),
        ("What are your opening hours?", "when are you open"),
    ]
    different = [
        ("How do I reset my password?", "How do I reset my router?"),
        ("Do you ship to Canada?", "Do you ship from Canada?"),
        ("I was charged twice", "I was not charged"),
    ]
    # Every clear paraphrase scores above every one-word change, and no one-word change is
    # answered. Whether a paraphrase clears the threshold is the rule's strictness (recipe 12
    # answers 4% of held-out questions): the whole-FAQ tests below pin what it answers.
    threshold = prepared_verifier.info.threshold
    paraphrases = prepared_verifier.probabilities(same)
    changes = prepared_verifier.probabilities(different)
    assert min(paraphrases) > max(changes), (paraphrases, changes)
    assert all(p < threshold for p in changes)


def test_its_rule_was_chosen_on_the_tune_sets_and_answers_none_of_them_wrongly(
    prepared_verifier: FaqVerifier,
) -> None:
    info = prepared_verifier.info
    assert info.margin in MARGINS
    assert info.tune_sets_wrong_entry == 0  # choose_rule never picks a rule with one
    # recipe 12 answers 4.5% right with none wrong (recipe 11 on an AMD EPYC 14.6%, on an
    # Intel Xeon 10.3%; recipe 7: 13.8% with 9 wrong): docs/faq.md
    assert info.tune_sets_recall > 0.03


def test_on_a_whole_faq_no_question_gets_another_entrys_answer(
    prepared_verifier: FaqVerifier,
) -> None:
    """The small fixed set (`support-basics`, split `ci`) judged as the product decides:
    each question against all 16 entries (the full benchmark: `python -m bench.faq_decision`)."""
    (basics,) = [s for s in load_sets(split="ci") if s.name == "support-basics"]
    (scored,) = score_sets([basics], embedder=shared_embedder(), verifier=prepared_verifier)
    rule = prepared_verifier.info.rule()
    tally = tallies([scored], rule)[("all", "all")]
    assert (tally.wrong_entry, tally.false_hits) == (0, 0)
    assert tally.right >= tally.answerable / 3  # it still answers clear paraphrases (7 of 18)
    ids = [entry.id for entry in basics.entries]
    for question in scored.questions:
        choice = decide(question, rule)
        if question.question.text in ISSUE_30_QUESTIONS:  # once answered with another entry
            assert judge(question.question, choice, ids) in {"right", "declined"}


ISSUE_30_QUESTIONS = {
    "I want to close my account permanently",  # got the password-reset answer
    "I moved - how do I update where my order is delivered?",  # got the order-tracking one
}
