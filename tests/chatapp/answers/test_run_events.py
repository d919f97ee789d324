"""What a worker's event does to its run (`chatapp/answers/run_events.py`): pure, no relay."""

from __future__ import annotations

import uuid

from chatapp.answers.entries import LoggedDelta
from chatapp.answers.run_events import (
    Append,
    Cancel,
    End,
    ShowStarted,
    Taken,
    stop_upstream,
    worker_event_actions,
)
from chatapp.answers.run_state import Run
from chatapp.answers.timeline import FirstTokenClock
from inference.wire.protocol import Accepted, Delta, Done, Error, Heartbeat
from tests.support.wire import done


def _run(*, deltas: int = 0) -> Run:
    run = Run(message_id=uuid.uuid4(), run_id=uuid.uuid4(), user_key="u", watchers={"w"})
    run.entries = [LoggedDelta(seq=n, text="w ") for n in range(1, deltas + 1)]
    run.queued = ("inference:queue:chat", "1-0")
    return run


def _accepted(run: Run, worker: str = "worker-a") -> Accepted:
    return Accepted(request_id=run.upstream_id, worker_channel=worker, queue_wait_ms=3.0)


def _delta(run: Run, seq: int, text: str = "w ") -> Delta:
    return Delta(request_id=run.upstream_id, seq=seq, text=text, tokens=2)


def _done(run: Run, seq: int) -> Done:
    return done(run.upstream_id, seq, prompt_tokens=9, completion_tokens=4)


def test_a_first_acceptance_shows_started_and_records_the_worker() -> None:
    run = _run()
    actions = worker_event_actions(run, _accepted(run), now=50.0)
    assert actions == [ShowStarted(), Taken("worker-a", run.upstream_id)]
    assert (run.worker_channel, run.accepted_at, run.seq_at_accept) == ("worker-a", 50.0, 1)
    assert run.queued is None  # off the queue: nothing to withdraw when it ends
    assert run.last_event == 50.0


def test_a_worker_taking_over_mid_answer_does_not_show_started_again() -> None:
    run = _run(deltas=3)
    actions = worker_event_actions(run, _accepted(run, "worker-b"), now=5.0)
    assert actions == [Taken("worker-b", run.upstream_id)]
    assert run.seq_at_accept == 4  # no token from this worker yet


def test_a_run_stopped_while_queued_cancels_the_worker_that_takes_it() -> None:
    run = _run()
    run.stop_code = ""
    actions = worker_event_actions(run, _accepted(run), now=1.0)
    assert actions[-1] == Cancel("worker-a", run.upstream_id)


def test_a_second_worker_starting_the_same_request_is_stopped_and_changes_nothing() -> None:
    run = _run()
    worker_event_actions(run, _accepted(run, "worker-a"), now=1.0)
    actions = worker_event_actions(run, _accepted(run, "worker-b"), now=2.0)
    assert actions == [Cancel("worker-b", run.upstream_id)]
    assert (run.worker_channel, run.accepted_at) == ("worker-a", 1.0)


def test_deltas_in_order_are_appended_with_their_tokens_and_repeats_dropped() -> None:
    run = _run()
    run.clock = FirstTokenClock()
    first = worker_event_actions(run, _delta(run, 1, "Hel"), now=7.0)
    assert first == [Append(LoggedDelta(seq=1, text="Hel"))]
    assert run.clock.relay_first_delta == 7.0
    run.entries.append(LoggedDelta(seq=1, text="Hel"))  # what the relay does with Append
    assert worker_event_actions(run, _delta(run, 1, "Hel"), now=8.0) == []  # a retried send
    assert worker_event_actions(run, _delta(run, 2, "lo"), now=9.0) == [
        Append(LoggedDelta(seq=2, text="lo"))
    ]
    assert run.completion_tokens == 4  # the repeat counted once
    assert run.clock.relay_first_delta == 7.0


def test_a_gap_in_the_deltas_stops_the_worker_and_ends_interrupted() -> None:
    run = _run(deltas=2)
    run.worker_channel = "worker-a"
    actions = worker_event_actions(run, _delta(run, 5), now=1.0)
    assert actions[0] == Cancel("worker-a", run.upstream_id)
    assert isinstance(actions[1], End)
    assert (actions[1].end.seq, actions[1].end.error_code) == (3, "interrupted")


def test_done_after_every_delta_completes_and_done_past_a_hole_is_interrupted() -> None:
    run = _run(deltas=2)
    [complete] = worker_event_actions(run, _done(run, seq=3), now=1.0)
    assert isinstance(complete, End)
    assert complete.end.status == "complete"
    [holed] = worker_event_actions(run, _done(run, seq=5), now=1.0)
    assert isinstance(holed, End)
    assert (holed.end.status, holed.end.error_code) == ("failed", "interrupted")


def test_a_worker_error_ends_the_run_with_the_code_the_browser_knows() -> None:
    run = _run(deltas=1)
    error = Error(request_id=run.upstream_id, seq=2, code="context_length", message="too long")
    [end] = worker_event_actions(run, error, now=1.0)
    assert isinstance(end, End)
    assert (end.end.seq, end.end.error_code) == (2, "too_long")


def test_a_heartbeat_only_says_the_worker_is_alive() -> None:
    run = _run()
    assert worker_event_actions(run, Heartbeat(request_id=run.upstream_id), now=42.0) == []
    assert run.last_event == 42.0


def test_events_of_no_run_here_free_the_worker_only_where_one_runs_it() -> None:
    accepted = Accepted(request_id="r", worker_channel="worker-a", queue_wait_ms=1.0)
    assert worker_event_actions(None, accepted, now=1.0) == [Cancel("worker-a", "r")]
    beat = Heartbeat(request_id="r")
    assert worker_event_actions(None, beat, now=1.0) == []  # a run ended here: nothing runs
    # a worker the run moved away from still generates it: stop it
    assert worker_event_actions(None, beat, now=1.0, left_behind="worker-old") == [
        Cancel("worker-old", "r")
    ]
    late = Delta(request_id="r", seq=1, text="x", tokens=1)
    assert worker_event_actions(None, late, now=1.0) == []


def test_stopping_upstream_targets_the_request_now_producing_the_run() -> None:
    run = _run()
    assert stop_upstream(run) == []  # queued: no worker to tell
    run.worker_channel, run.migrations = "worker-b", 1
    assert stop_upstream(run) == [Cancel("worker-b", f"{run.run_id}~1")]
