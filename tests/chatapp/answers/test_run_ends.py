"""How a run ends, decided from what happened (`chatapp/answers/run_ends.py`, pure)."""

from __future__ import annotations

import uuid

import pytest

from chatapp.answers.entries import LoggedDelta
from chatapp.answers.run_ends import done_end, lost_end, stopped_end, unqueued_end, worker_error_end
from chatapp.answers.run_state import Run
from inference.wire.protocol import Done, Error


def _run(*, deltas: int = 2, migrations: int = 0, stop_code: str | None = None) -> Run:
    run = Run(message_id=uuid.uuid4(), run_id=uuid.uuid4(), user_key="u", watchers=set())
    run.entries = [LoggedDelta(seq=n, text="w ") for n in range(1, deltas + 1)]
    run.migrations, run.stop_code, run.completion_tokens = migrations, stop_code, 14
    return run


def _done(finish_reason: str = "stop", completion_tokens: int = 4) -> Done:
    return Done.model_validate(
        {
            "request_id": "r",
            "seq": 3,
            "finish_reason": finish_reason,
            "prompt_tokens": 9,
            "completion_tokens": completion_tokens,
            "cached_prompt_tokens": 0,
            "queue_wait_ms": 1.0,
            "total_ms": 2.0,
        }
    )


def test_a_finished_answer_is_complete_at_the_next_seq_with_every_workers_tokens() -> None:
    end = done_end(_run(migrations=1), _done(completion_tokens=4))
    assert (end.seq, end.status, end.finish_reason, end.error_code) == (3, "complete", "stop", "")
    assert end.resumed is True
    assert end.completion_tokens == 14  # 10 on the first worker, 4 on the last
    assert end.prompt_tokens == 9


@pytest.mark.parametrize(("stop_code", "error_code"), [("", ""), ("client_disconnected",) * 2])
def test_an_aborted_answer_is_stopped_with_why_it_was_asked_to(
    stop_code: str, error_code: str
) -> None:
    end = done_end(_run(stop_code=stop_code), _done("abort"))
    assert (end.status, end.finish_reason, end.error_code) == ("stopped", "abort", error_code)
    assert end.resumed is False


@pytest.mark.parametrize(
    ("worker_code", "shown"),
    [
        ("context_length", "too_long"),
        ("invalid_request", "invalid"),
        ("overloaded", "busy"),
        ("internal", "worker_lost"),
        ("engine", "engine"),
    ],
)
def test_a_worker_error_is_shown_with_the_browsers_code(worker_code: str, shown: str) -> None:
    error = Error.model_validate(
        {"request_id": "r", "seq": 3, "code": worker_code, "message": "why"}
    )
    end = worker_error_end(seq=3, error=error)
    assert (end.seq, end.status, end.error_code, end.error_message) == (3, "failed", shown, "why")


def test_the_other_ends_say_what_happened() -> None:
    assert (lost_end(seq=5).status, lost_end(seq=5).error_code) == ("failed", "interrupted")
    assert "lost in transit" in lost_end(seq=5).error_message
    assert (unqueued_end(seq=1).error_code, unqueued_end(seq=1).seq) == ("busy", 1)
    stopped = stopped_end(seq=2, code="client_disconnected")
    assert (stopped.status, stopped.finish_reason, stopped.error_code) == (
        "stopped",
        "abort",
        "client_disconnected",
    )
