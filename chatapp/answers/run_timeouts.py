"""Which of a run's time bounds has run out: a pure decision, and the end each one writes.

The relay's tick reads each run's clocks into a `RunTimes` and acts on what `timeouts_due`
returns (it does the I/O: queue moves, migration, the final write). Kept apart so every bound
is unit-tested without a relay, a layer or a clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from chatapp.answers.entries import LoggedEnd
from chatapp.answers.run_state import Run

# to_shared: its conversation's worker did not take it in time: offer it to every worker
# unstarted: no worker took it within the accept timeout: fail `no_worker` unless live workers
#   have room (then it waits in their queue, up to the queue timeout)
# busy: it waited the whole queue timeout
# worker_lost: its worker went silent or left the registry: move it on, or fail `worker_lost`
# first_token: its worker accepted it and wrote nothing within the first-token bound
# grace_over: nobody watched it for the disconnect grace: abort it
Due = Literal["to_shared", "unstarted", "busy", "worker_lost", "first_token", "grace_over"]


class Bounds(Protocol):
    @property
    def accept_timeout_s(self) -> float: ...
    @property
    def queue_timeout_s(self) -> float: ...
    @property
    def stall_timeout_s(self) -> float: ...
    @property
    def first_token_timeout_s(self) -> float: ...
    @property
    def disconnect_grace_s(self) -> float: ...
    @property
    def affinity_wait_s(self) -> float: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RunTimes:
    """What the bounds read of one run, at one instant."""

    silent_s: float  # since its last event (or since it was queued)
    accepted: bool  # a worker is serving it
    on_own_queue: bool  # queued on its conversation's worker's queue, not the shared one
    worker_gone: bool = False  # its worker left the registry
    since_accept_s: float | None = None  # since its latest worker accepted it
    wrote_since_accept: bool = False  # that worker sent a token
    unwatched_s: float | None = None  # nobody has watched it for this long
    stopping: bool = False  # a stop was asked (the user's, or the grace ran out)
    finish_unwatched: bool = False  # generate to the end even unwatched (an API retry)

    @classmethod
    def of(cls, run: Run, *, now: float, worker_gone: bool, on_own_queue: bool) -> RunTimes:
        """What the bounds read of `run` at `now` (monotonic)."""
        return cls(
            silent_s=now - run.last_event,
            accepted=run.worker_channel is not None,
            on_own_queue=on_own_queue,
            worker_gone=worker_gone,
            since_accept_s=None
            if run.accepted_at is None or run.worker_channel is None
            else now - run.accepted_at,
            wrote_since_accept=run.next_seq > run.seq_at_accept,
            unwatched_s=None if run.unwatched_since is None else now - run.unwatched_since,
            stopping=run.stop_code is not None,
            finish_unwatched=run.finish_unwatched,
        )


def timeouts_due(run: RunTimes, bounds: Bounds) -> list[Due]:
    """The bounds that ran out, in the order to act on them (at most one ends the run)."""
    due: list[Due] = []
    if not run.accepted and run.on_own_queue and run.silent_s >= bounds.affinity_wait_s:
        due.append("to_shared")
    if not run.accepted and run.silent_s >= bounds.accept_timeout_s:
        due.append("unstarted" if run.silent_s < bounds.queue_timeout_s else "busy")
    elif run.accepted and (run.silent_s >= bounds.stall_timeout_s or run.worker_gone):
        due.append("worker_lost")
    elif (
        run.since_accept_s is not None
        and bounds.first_token_timeout_s > 0
        and not run.wrote_since_accept
        and run.since_accept_s >= bounds.first_token_timeout_s
    ):
        due.append("first_token")
    elif (
        run.unwatched_s is not None
        and not run.stopping
        and not run.finish_unwatched
        and run.unwatched_s >= bounds.disconnect_grace_s
    ):
        due.append("grace_over")
    return due


def timeout_end(due: Due, *, seq: int, bounds: Bounds, has_text: bool) -> LoggedEnd:
    """The end a run gets when `due` fails it (`to_shared` and `grace_over` never do)."""
    if due == "unstarted":
        code, message = (
            "no_worker",
            ("No inference worker is available right now. Please try again in a moment."),
        )
    elif due == "busy":
        code, message = (
            "busy",
            ("The assistant was too busy to start your answer. Please try again in a moment."),
        )
    elif due == "worker_lost":
        code, message = (
            "worker_lost",
            (
                "The assistant stopped responding (its worker was lost). What it wrote so far is "
                "kept; please ask again."
            ),
        )
    elif due == "first_token" and not has_text:
        code, message = (
            "timeout",
            (
                f"The assistant did not start answering within {bounds.first_token_timeout_s:g} s. "
                "Please try again; a shorter message is answered sooner."
            ),
        )
    elif due == "first_token":
        code, message = (
            "timeout",
            (
                "The assistant did not go on with the answer within "
                f"{bounds.first_token_timeout_s:g} s. What it wrote so far is kept; "
                "please ask again."
            ),
        )
    else:
        raise ValueError(f"{due!r} does not end a run")
    return LoggedEnd(seq=seq, status="failed", error_code=code, error_message=message)
