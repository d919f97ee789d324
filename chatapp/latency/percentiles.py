"""One percentile rule for the latency dashboard: nearest rank.

The p-th percentile of n values is the smallest value such that at least p % of the values
are less than or equal to it: sort ascending, take the value at 1-based rank ceil(p/100 * n)
(rank 1 for p = 0). It is always one of the measured values (no interpolation), so "P99 =
840 ms" means some answer really waited 840 ms, and it is exact for any n (with 10 values,
P95 and P99 are both the largest one: there are too few answers to tell them apart).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank p-th percentile (0 <= p <= 100) of `values`; None when there are none."""
    return percentiles(values, (p,))[0]


def percentiles(values: Sequence[float], ps: Sequence[float]) -> list[float | None]:
    """Several nearest-rank percentiles of the same values (sorted once)."""
    for p in ps:
        if not 0 <= p <= 100:
            raise ValueError(f"a percentile is between 0 and 100, got {p}")
    if not values:
        return [None for _ in ps]
    ordered = sorted(values)
    return [ordered[_rank(p, len(ordered)) - 1] for p in ps]


def _rank(p: float, n: int) -> int:
    # Exact arithmetic: with floats, 0.29 * 100 is 28.999..., which would shift the rank.
    return max(1, math.ceil(Fraction(str(p)) * n / 100))
