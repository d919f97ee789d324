"""The affinity bench's report: shares over follow-up turns only, errors counted apart."""

from __future__ import annotations

import pytest

from bench.affinity import Arm, Turn


def test_the_cached_share_counts_follow_up_turns_only() -> None:
    arm = Arm("affinity")
    arm.turns = [
        Turn("affinity", 0, 0, prompt_tokens=1000, cached_tokens=0, worker="a"),
        Turn(
            "affinity", 0, 1, prompt_tokens=1100, cached_tokens=1000, worker="a", same_worker=True
        ),
        Turn("affinity", 0, 2, prompt_tokens=1200, cached_tokens=0, worker="b", same_worker=False),
        Turn("affinity", 0, 3, error="engine"),
    ]
    summary = arm.summary()
    assert summary["follow_up_turns"] == 2
    assert summary["cached_share"] == pytest.approx(1000 / 2300)
    assert summary["same_worker_share"] == 0.5
    assert summary["errors"] == 1
