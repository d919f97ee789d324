"""The per-socket frame budget (chatapp/realtime/frame_budget.py): pure token buckets."""

from __future__ import annotations

import pytest
from django.test import override_settings

from chatapp.realtime.frame_budget import FRAME, RESUME, FrameBudget


def budget(
    *, per_s: float = 5, burst: int = 20, resumes_per_s: float = 0.2, resume_burst: int = 3
) -> FrameBudget:
    return FrameBudget(
        frames_per_s=per_s, burst=burst, resumes_per_s=resumes_per_s, resume_burst=resume_burst
    )


def test_a_full_burst_is_allowed_then_the_next_frame_waits_for_one_token() -> None:
    b = budget(per_s=5, burst=20)
    assert all(b.take(kind=FRAME, now=100.0) is None for _ in range(20))
    assert b.take(kind=FRAME, now=100.0) == pytest.approx(0.2)  # one token at 5/s


def test_the_bucket_refills_at_the_rate_and_never_above_the_burst() -> None:
    b = budget(per_s=5, burst=20)
    for _ in range(20):
        b.take(kind=FRAME, now=0.0)
    assert b.take(kind=FRAME, now=0.1) == pytest.approx(0.1)  # half a token so far
    assert b.take(kind=FRAME, now=0.2) is None  # a whole one
    assert b.take(kind=FRAME, now=0.2) is not None
    # an hour idle refills only to the burst, not to 18000 frames
    allowed = sum(b.take(kind=FRAME, now=3600.0) is None for _ in range(100))
    assert allowed == 20


def test_a_refused_frame_costs_nothing_so_waiting_the_retry_after_is_enough() -> None:
    b = budget(per_s=2, burst=1)
    assert b.take(kind=FRAME, now=0.0) is None
    retry = b.take(kind=FRAME, now=0.0)
    assert retry == pytest.approx(0.5)
    for _ in range(50):  # hammering while refused does not push the retry further out
        assert b.take(kind=FRAME, now=0.0) == pytest.approx(0.5)
    assert b.take(kind=FRAME, now=0.5) is None


def test_steady_typing_speed_never_trips_the_defaults() -> None:
    b = FrameBudget.from_settings()
    # a frame every 250 ms for ten minutes, with a reconnect-style burst of 10 every minute
    now = 0.0
    for second in range(600):
        for _ in range(4):
            assert b.take(kind=FRAME, now=now) is None
            now += 0.25
        if second % 60 == 0:
            assert all(b.take(kind=FRAME, now=now) is None for _ in range(10))


def test_a_flood_is_cut_to_the_burst_plus_the_rate() -> None:
    b = budget(per_s=5, burst=20)
    # 10,000 frames in one second: 20 (burst) + 5 (refill) get through
    allowed = sum(b.take(kind=FRAME, now=i / 10_000) is None for i in range(10_000))
    assert allowed in (24, 25)


def test_resumes_have_their_own_smaller_budget() -> None:
    b = budget(per_s=5, burst=20, resumes_per_s=0.2, resume_burst=3)
    assert all(b.take(kind=RESUME, now=0.0) is None for _ in range(3))
    assert b.take(kind=RESUME, now=0.0) == pytest.approx(5.0)  # one resume per 5 s
    # other frames are not held up by spent resumes
    assert b.take(kind=FRAME, now=0.0) is None
    assert b.take(kind=RESUME, now=5.0) is None


def test_resumes_do_not_spend_the_frame_budget_and_frames_do_not_spend_resumes() -> None:
    b = budget(per_s=1, burst=2, resumes_per_s=1, resume_burst=1)
    assert b.take(kind=FRAME, now=0.0) is None
    assert b.take(kind=FRAME, now=0.0) is None
    assert b.take(kind=FRAME, now=0.0) is not None
    assert b.take(kind=RESUME, now=0.0) is None  # frames spent, resume budget untouched


def test_a_zero_rate_turns_that_limit_off() -> None:
    b = budget(per_s=0, burst=1, resumes_per_s=0, resume_burst=1)
    assert all(b.take(kind=FRAME, now=0.0) is None for _ in range(1000))
    assert all(b.take(kind=RESUME, now=0.0) is None for _ in range(1000))


def test_a_clock_that_steps_back_does_not_mint_tokens() -> None:
    b = budget(per_s=1, burst=1)
    assert b.take(kind=FRAME, now=10.0) is None
    assert b.take(kind=FRAME, now=5.0) is not None


def test_an_unknown_kind_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="kind"):
        budget().take(kind="chat.send", now=0.0)


@pytest.mark.parametrize(
    ("field", "value"),
    [("frames_per_s", -1.0), ("burst", 0), ("resumes_per_s", -0.5), ("resume_burst", 0)],
)
def test_nonsense_limits_are_refused(field: str, value: float) -> None:
    kwargs: dict[str, float] = {
        "frames_per_s": 5,
        "burst": 20,
        "resumes_per_s": 0.2,
        "resume_burst": 3,
        field: value,
    }
    with pytest.raises(ValueError, match=field):
        FrameBudget(
            frames_per_s=kwargs["frames_per_s"],
            burst=int(kwargs["burst"]),
            resumes_per_s=kwargs["resumes_per_s"],
            resume_burst=int(kwargs["resume_burst"]),
        )


@override_settings(
    CHAT_SOCKET_FRAMES_PER_S=1.0,
    CHAT_SOCKET_FRAME_BURST=2,
    CHAT_SOCKET_RESUMES_PER_S=0.5,
    CHAT_SOCKET_RESUME_BURST=1,
)
def test_from_settings_reads_the_chat_socket_settings() -> None:
    b = FrameBudget.from_settings()
    assert [b.take(kind=FRAME, now=0.0) for _ in range(3)][-1] == pytest.approx(1.0)
    assert b.take(kind=RESUME, now=0.0) is None
    assert b.take(kind=RESUME, now=0.0) == pytest.approx(2.0)
