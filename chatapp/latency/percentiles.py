"""The one percentile function of the project, with the rules its callers use.

The latency dashboard uses nearest rank (the default): the p-th percentile of n values is the
smallest value such that at least p % of the values are less than or equal to it: sort
ascending, take the value at 1-based rank ceil(p/100 * n) (rank 1 for p = 0). It is always one
of the measured values (no interpolation), so "P99 = 840 ms" means some answer really waited
840 ms, and it is exact for any n (with 10 values, P95 and P99 are both the largest one: there
are too few answers to tell them apart).

The benches report `"linear"` (interpolation between the closest ranks, numpy's default: at
position (n - 1) * p/100 of the sorted values) and the FAQ calibration `"closest"` (the value at
that position rounded to the nearest index, half to even).

A float p is read as the decimal it prints as (99.9 is 999/10); pass a `Fraction` for an exact
binary value (`Fraction(q) * 100` for a quantile q in 0..1, as bench.harness does).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Literal

Method = Literal["nearest-rank", "linear", "closest"]


def percentile(
    values: Sequence[float], p: float | Fraction, *, method: Method = "nearest-rank"
) -> float | None:
    """The p-th percentile (0 <= p <= 100) of `values` by `method`; None when there are none."""
    return percentiles(values, (p,), method=method)[0]


def percentiles(
    values: Sequence[float], ps: Sequence[float | Fraction], *, method: Method = "nearest-rank"
) -> list[float | None]:
    """Several percentiles of the same values (sorted once)."""
    for p in ps:
        if not 0 <= p <= 100:
            raise ValueError(f"a percentile is between 0 and 100, got {p}")
    ordered = sorted(values)
    if not ordered:
        return [None for _ in ps]
    return [_pick(ordered, _exact(p), method) for p in ps]


def _exact(p: float | Fraction) -> Fraction:
    # Exact arithmetic: with floats, 0.29 * 100 is 28.999..., which would shift the rank.
    return p if isinstance(p, Fraction) else Fraction(str(p))


def _pick(ordered: list[float], p: Fraction, method: Method) -> float:
    n = len(ordered)
    if method == "nearest-rank":
        return ordered[max(1, math.ceil(p * n / 100)) - 1]
    q = float(p / 100)
    if method == "linear":
        pos = (n - 1) * q
        low = int(pos)
        high = min(low + 1, n - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
    return ordered[min(n - 1, round(q * (n - 1)))]
