"""How a run ends, decided from what happened (pure: no I/O).

The relay (`relay.py`) logs the end, stores it once and tells the watchers; the ends of its
time bounds are decided the same way in `run_timeouts.py`.
"""

from __future__ import annotations

from chatapp.answers.entries import LoggedEnd
from chatapp.answers.run_state import Run
from inference.wire.protocol import Done, Error, stats_of

# Worker error codes as the browser sees them (docs/protocol.md).
WORKER_ERRORS = {
    "engine": "engine",
    "invalid_request": "invalid",
    "context_length": "too_long",
    "overloaded": "busy",
    "internal": "worker_lost",
}


def done_end(run: Run, done: Done) -> LoggedEnd:
    """The worker finished: complete, or stopped (aborted) with why it was asked to stop."""
    stopped = done.finish_reason == "abort"
    return LoggedEnd(
        seq=run.next_seq,
        status="stopped" if stopped else "complete",
        finish_reason=done.finish_reason,
        error_code=(run.stop_code or "") if stopped else "",
        worker_hops=done.hops,
        **{
            **stats_of(done).model_dump(),
            "resumed": run.migrations > 0,
            # every worker's tokens (the prompt's are the last worker's own prompt)
            "completion_tokens": max(run.completion_tokens, done.completion_tokens),
        },
    )


def worker_error_end(*, seq: int, error: Error) -> LoggedEnd:
    return LoggedEnd(
        seq=seq,
        status="failed",
        error_code=WORKER_ERRORS.get(error.code, "engine"),
        error_message=error.message,
    )


def lost_end(*, seq: int) -> LoggedEnd:
    """Part of the stream never arrived (Redis restarted under it): the text has a hole."""
    return LoggedEnd(
        seq=seq,
        status="failed",
        error_code="interrupted",
        error_message=(
            "Part of the answer was lost in transit. What arrived is kept; please ask again."
        ),
    )


def unqueued_end(*, seq: int) -> LoggedEnd:
    """The request could not be queued (Redis full or away)."""
    return LoggedEnd(
        seq=seq,
        status="failed",
        error_code="busy",
        error_message="The assistant is overloaded right now. Please try again.",
    )


def stopped_end(*, seq: int, code: str) -> LoggedEnd:
    """Stopped before any worker took it (`code`: "" the user's Stop, or why)."""
    return LoggedEnd(seq=seq, status="stopped", finish_reason="abort", error_code=code)
