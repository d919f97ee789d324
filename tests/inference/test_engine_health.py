"""The decision to stop a worker on failing health checks."""

from __future__ import annotations

from inference.engine_health import HealthWatch
from inference.engines.base import EngineDeadError, EngineError


def test_a_remote_engine_stops_the_worker_only_after_failures_in_a_row() -> None:
    watch = HealthWatch(allowed_failures=3)
    blip = EngineError("502")
    assert [watch.checked(e) for e in (blip, blip, None, blip, TimeoutError(), None)] == [False] * 6
    assert [watch.checked(blip) for _ in range(3)] == [False, False, True]


def test_a_dead_engine_stops_the_worker_at_the_first_check() -> None:
    assert HealthWatch(allowed_failures=3).checked(EngineDeadError("core died"))


def test_one_allowed_failure_stops_at_the_first() -> None:
    assert HealthWatch(allowed_failures=1).checked(EngineError("refused"))
