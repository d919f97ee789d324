"""What a delivery attempt leads to: delivered, tried again after the project's backoff, or
given up after the bounded attempts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from chatapp.handoff.webhook_delivery import attempt_result, retry_delay_s

NOW = datetime(2026, 12, 10, 9, 0, tzinfo=UTC)


def test_the_backoff_doubles_from_10_s_up_to_10_min() -> None:
    assert [retry_delay_s(n) for n in range(1, 9)] == [10, 20, 40, 80, 160, 320, 600, 600]


def test_an_accepted_attempt_is_delivered() -> None:
    result = attempt_result(attempts=3, max_attempts=10, error=None, now=NOW)
    assert (result.status, result.next_attempt_at, result.last_error) == ("delivered", NOW, "")


def test_a_failed_attempt_waits_its_backoff_then_the_last_one_gives_up() -> None:
    second = attempt_result(attempts=2, max_attempts=3, error="HTTP 502", now=NOW)
    assert (second.status, second.last_error) == ("pending", "HTTP 502")
    assert second.next_attempt_at == NOW + timedelta(seconds=20)
    last = attempt_result(attempts=3, max_attempts=3, error="HTTP 502", now=NOW)
    assert (last.status, last.last_error) == ("failed", "HTTP 502")
