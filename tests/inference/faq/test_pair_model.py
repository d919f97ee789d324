"""The verifier's head scores a pair the same however the pairs are batched: training asks a
whole grid of questions against an FAQ's entries at once, the worker a few pairs."""

from __future__ import annotations

import torch

from inference.faq.pair_model import FEATURES, PairHead, QuestionVectors, batch_of


def question(length: int) -> QuestionVectors:
    sentence = torch.nn.functional.normalize(torch.randn(384), dim=0)
    return QuestionVectors(tokens=torch.randn(length, FEATURES).half(), sentence=sentence)


def test_a_grid_scores_each_pair_as_it_scores_alone() -> None:
    torch.manual_seed(0)
    head = PairHead().eval()
    entries = [question(n) for n in (5, 9, 7)]
    asked = [question(n) for n in (11, 4)]
    grid = [(entry, one) for one in asked for entry in entries]
    batch = batch_of(grid)
    assert (len(batch.a.tokens), len(batch.b.tokens)) == (3, 2)  # each question padded once
    with torch.inference_mode():
        together = head(batch)
        alone = torch.cat([head(batch_of([pair])) for pair in grid])
    assert together.shape == (6,)
    assert torch.allclose(together, alone, atol=1e-5)


def test_the_head_is_symmetric_in_its_two_questions() -> None:
    torch.manual_seed(1)
    head = PairHead().eval()
    a, b = question(6), question(10)
    with torch.inference_mode():
        assert torch.allclose(head(batch_of([(a, b)])), head(batch_of([(b, a)])), atol=1e-5)


def test_in_training_each_pair_gets_its_own_dropout() -> None:
    """A question in two pairs is projected once, but dropped out per pair: two copies of one
    pair in a training batch get different logits."""
    torch.manual_seed(2)
    head = PairHead(dropout=0.5).train()
    a, b = question(6), question(8)
    logits = head(batch_of([(a, b), (a, b)]))
    assert not torch.allclose(logits[0], logits[1])
