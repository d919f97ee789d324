"""The dashboard's one percentile rule (nearest rank) against worked examples."""

from __future__ import annotations

import random

import pytest

from chatapp.latency.percentiles import percentile, percentiles


@pytest.mark.parametrize(
    ("values", "p", "expected"),
    [
        # The nearest-rank examples of the usual textbook definition.
        ([15, 20, 35, 40, 50], 5, 15),
        ([15, 20, 35, 40, 50], 30, 20),
        ([15, 20, 35, 40, 50], 40, 20),
        ([15, 20, 35, 40, 50], 50, 35),
        ([15, 20, 35, 40, 50], 100, 50),
        ([3, 6, 7, 8, 8, 10, 13, 15, 16, 20], 25, 7),
        ([3, 6, 7, 8, 8, 10, 13, 15, 16, 20], 50, 8),
        ([3, 6, 7, 8, 8, 10, 13, 15, 16, 20], 75, 15),
        ([3, 6, 7, 8, 8, 9, 10, 13, 15, 16, 20], 50, 9),
        ([3, 6, 7, 8, 8, 9, 10, 13, 15, 16, 20], 75, 15),
        # P0 is the smallest value; one value is every percentile.
        ([4, 2, 9], 0, 2),
        ([42.5], 99, 42.5),
    ],
)
def test_nearest_rank_matches_worked_examples(
    values: list[float], p: float, expected: float
) -> None:
    assert percentile(values, p) == expected


def test_percentiles_of_1_to_100_are_the_ranks_themselves() -> None:
    values = list(range(1, 101))
    random.Random(7).shuffle(values)  # order of the input does not matter
    assert percentiles(values, (50, 95, 99, 100)) == [50, 95, 99, 100]


def test_fractional_percentiles_use_exact_ranks() -> None:
    # 0.29 * 100 is 28.999... and 99.9 * 1000 is 99900.00000000001 in floats.
    assert percentile(list(range(1, 101)), 29) == 29
    assert percentile(list(range(1, 1001)), 99.9) == 999


def test_few_values_make_the_high_percentiles_the_maximum() -> None:
    assert percentiles([100.0, 300.0, 200.0], (50, 95, 99)) == [200.0, 300.0, 300.0]


def test_no_values_have_no_percentile() -> None:
    assert percentile([], 50) is None
    assert percentiles([], (50, 95)) == [None, None]


@pytest.mark.parametrize("p", [-1, 100.5])
def test_a_percentile_outside_0_to_100_is_refused(p: float) -> None:
    with pytest.raises(ValueError, match="between 0 and 100"):
        percentile([1.0], p)
