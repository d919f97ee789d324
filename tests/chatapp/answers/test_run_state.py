"""A relay's run table (`chatapp/answers/run_state.py`) and what the time bounds read of a run
(`RunTimes.of`): pure, no relay."""

from __future__ import annotations

import uuid

from chatapp.answers.entries import LoggedDelta
from chatapp.answers.run_state import Run, RunTable
from chatapp.answers.run_timeouts import RunTimes


def _run() -> Run:
    return Run(message_id=uuid.uuid4(), run_id=uuid.uuid4(), user_key="u", watchers={"w"})


def test_a_worker_request_finds_its_run_and_only_the_current_one_is_live() -> None:
    table = RunTable()
    run = _run()
    table[run.run_id] = run
    first = str(run.run_id)
    assert table.of_request(first) is run
    assert table.live(first) is run

    run.left_behind[first] = "worker-a"  # it moved: the worker request is now `<run>~1`
    run.migrations = 1
    assert table.live(first) is None  # an event of the worker it left is not its own
    assert table.live(f"{run.run_id}~1") is run
    assert table.left_behind_by(first) == "worker-a"
    assert table.left_behind_by(f"{run.run_id}~1") is None

    run.ending = True
    assert table.live(f"{run.run_id}~1") is None


def test_a_request_of_no_run_here_finds_nothing() -> None:
    table = RunTable()
    assert table.of_request(str(uuid.uuid4())) is None
    assert table.of_request("prefill-not-a-uuid") is None
    assert table.live("garbage~2") is None
    assert table.left_behind_by("garbage") is None


def test_the_bounds_read_a_runs_clocks_at_one_instant() -> None:
    run = _run()
    run.last_event, run.accepted_at, run.worker_channel = 100.0, 104.0, "worker-a"
    run.entries = [LoggedDelta(seq=1, text="w ")]
    run.seq_at_accept = 1  # it wrote since its worker accepted it
    times = RunTimes.of(run, now=110.0, worker_gone=True, on_own_queue=False)
    assert (times.silent_s, times.accepted, times.since_accept_s) == (10.0, True, 6.0)
    assert (times.worker_gone, times.wrote_since_accept, times.unwatched_s) == (True, True, None)

    run.worker_channel, run.unwatched_since, run.stop_code = None, 107.0, ""
    waiting = RunTimes.of(run, now=110.0, worker_gone=False, on_own_queue=True)
    assert (waiting.accepted, waiting.since_accept_s, waiting.unwatched_s) == (False, None, 3.0)
    assert (waiting.on_own_queue, waiting.stopping) == (True, True)
