"""The one retry policy: delays double from the first up to the cap, and start over on reset."""

from __future__ import annotations

import time

from inference.wire.retry import FULL_CHANNEL, RECEIVE, SEND, BackoffPolicy


def test_delays_double_up_to_the_cap_and_start_over_on_reset() -> None:
    backoff = BackoffPolicy(first_s=0.1, cap_s=0.5).start()
    assert [backoff.delay() for _ in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    backoff.reset()
    assert backoff.delay() == 0.1


async def test_a_sleep_never_waits_past_what_is_left() -> None:
    backoff = BackoffPolicy(first_s=5.0, cap_s=5.0).start()
    started = time.monotonic()
    await backoff.sleep(at_most_s=0.01)
    assert time.monotonic() - started < 1.0


def test_the_named_policies_wait_less_the_sooner_an_answer_needs_it() -> None:
    assert FULL_CHANNEL.first_s < SEND.first_s <= RECEIVE.first_s
    assert all(p.first_s <= p.cap_s for p in (FULL_CHANNEL, SEND, RECEIVE))
