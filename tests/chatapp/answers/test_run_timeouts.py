"""A run's time bounds (chatapp/answers/run_timeouts.py): which ran out, and the end each
writes. Pure: no relay, no clock."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from chatapp.answers.run_timeouts import RunTimes, timeout_end, timeouts_due


@dataclass(frozen=True)
class Bounds:
    accept_timeout_s: float = 5.0
    queue_timeout_s: float = 120.0
    stall_timeout_s: float = 10.0
    first_token_timeout_s: float = 60.0
    disconnect_grace_s: float = 30.0
    affinity_wait_s: float = 1.0


B = Bounds()


def queued(silent_s: float, *, own: bool = False) -> RunTimes:
    return RunTimes(silent_s=silent_s, accepted=False, on_own_queue=own)


def serving(silent_s: float = 0.0, **fields: object) -> RunTimes:
    values: dict[str, object] = {"silent_s": silent_s, "accepted": True, "on_own_queue": False}
    return RunTimes(**{**values, **fields})  # type: ignore[arg-type]


def test_a_queued_run_moves_to_every_worker_then_times_out_unstarted_then_busy() -> None:
    assert timeouts_due(queued(0.5, own=True), B) == []
    assert timeouts_due(queued(1.0, own=True), B) == ["to_shared"]
    assert timeouts_due(queued(1.0), B) == []  # already on the shared queue
    assert timeouts_due(queued(5.0, own=True), B) == ["to_shared", "unstarted"]
    assert timeouts_due(queued(119.9), B) == ["unstarted"]
    assert timeouts_due(queued(120.0), B) == ["busy"]


def test_a_served_run_is_lost_when_its_worker_is_silent_or_gone() -> None:
    assert timeouts_due(serving(9.9, since_accept_s=20, wrote_since_accept=True), B) == []
    assert timeouts_due(serving(10.0), B) == ["worker_lost"]
    assert timeouts_due(serving(0.1, worker_gone=True), B) == ["worker_lost"]


def test_the_first_token_bound_counts_from_the_latest_workers_accept() -> None:
    waiting = serving(since_accept_s=60.0, wrote_since_accept=False)
    assert timeouts_due(waiting, B) == ["first_token"]
    assert timeouts_due(serving(since_accept_s=59.9), B) == []
    assert timeouts_due(serving(since_accept_s=600, wrote_since_accept=True), B) == []
    off = Bounds(first_token_timeout_s=0)
    assert timeouts_due(waiting, off) == []


def test_an_unwatched_run_is_aborted_after_the_grace_unless_told_to_finish() -> None:
    assert timeouts_due(serving(unwatched_s=29.9, wrote_since_accept=True), B) == []
    assert timeouts_due(serving(unwatched_s=30.0, wrote_since_accept=True), B) == ["grace_over"]
    assert timeouts_due(serving(unwatched_s=99, stopping=True, wrote_since_accept=True), B) == []
    finishing = serving(unwatched_s=99, finish_unwatched=True, wrote_since_accept=True)
    assert timeouts_due(finishing, B) == []


def test_each_failing_bound_writes_its_error_and_keeps_the_seq() -> None:
    codes = {
        due: timeout_end(due, seq=7, bounds=B, has_text=True).error_code
        for due in ("unstarted", "busy", "worker_lost", "first_token")
    }
    assert codes == {
        "unstarted": "no_worker",
        "busy": "busy",
        "worker_lost": "worker_lost",
        "first_token": "timeout",
    }
    end = timeout_end("first_token", seq=7, bounds=B, has_text=True)
    assert (end.seq, end.status) == (7, "failed")
    assert "What it wrote so far is kept" in end.error_message
    assert (
        "did not start answering"
        in timeout_end("first_token", seq=1, bounds=B, has_text=False).error_message
    )
    with pytest.raises(ValueError, match="does not end a run"):
        timeout_end("grace_over", seq=1, bounds=B, has_text=False)
