"""What a worker's event does to its run: a pure transition that returns actions.

The relay (`relay.py`) looks the run up, calls `worker_event_actions` and carries the actions
out in order (channel sends, log appends, the end); nothing here waits on I/O, the way vLLM's
`output_processor` decides what to abort and leaves the aborting to its caller. The run's own
fields (its worker, when it was accepted, its token count) are updated here: the run is the
state this transition owns.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from chatapp.answers.entries import LoggedDelta, LoggedEnd
from chatapp.answers.run_ends import done_end, lost_end, worker_error_end
from chatapp.answers.run_state import Run
from inference.wire.protocol import Accepted, Delta, Done, Error, Heartbeat, WorkerEvent

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Cancel:
    """Tell a worker to stop generating a request."""

    worker_channel: str
    request_id: str


@dataclass(frozen=True, slots=True)
class ShowStarted:
    """Tell the run's watchers a worker is reading their question."""


@dataclass(frozen=True, slots=True)
class Taken:
    """A worker took the run's request: remember it (routing affinity, the owner record)."""

    worker_channel: str
    request_id: str


@dataclass(frozen=True, slots=True)
class Append:
    """Log a delta of the answer and send it to the watchers."""

    entry: LoggedDelta


@dataclass(frozen=True, slots=True)
class End:
    """End the run with this end."""

    end: LoggedEnd


Action = Cancel | ShowStarted | Taken | Append | End


def worker_event_actions(
    run: Run | None, event: WorkerEvent, *, now: float, left_behind: str | None = None
) -> list[Action]:
    """What to do about `event`. `run`: the live run whose current worker request the event
    belongs to (None: no such run here); `left_behind`: the worker of a request the run moved
    away from, when the event is one of those (`RunTable.left_behind_by`)."""
    if run is None:
        if isinstance(event, Accepted):  # we gave up on it: free the engine
            return [Cancel(event.worker_channel, event.request_id)]
        if isinstance(event, Heartbeat) and left_behind is not None:
            return [Cancel(left_behind, event.request_id)]  # a worker we moved away from
        return []
    run.last_event = now
    if isinstance(event, Accepted):
        return _accepted(run, event, now=now)
    if isinstance(event, Delta):
        return _delta(run, event, now=now)
    if isinstance(event, Done):
        if event.seq > run.next_seq:  # the last deltas never came: not complete
            return [End(lost_end(seq=run.next_seq))]
        return [End(done_end(run, event))]
    if isinstance(event, Error):
        return [End(worker_error_end(seq=run.next_seq, error=event))]
    return []  # a heartbeat: `last_event` is all it says


def stop_upstream(run: Run) -> list[Action]:
    """Stop the worker request now producing the run, if a worker has it."""
    if run.worker_channel is None:
        return []
    return [Cancel(run.worker_channel, run.upstream_id)]


def _accepted(run: Run, event: Accepted, *, now: float) -> list[Action]:
    if run.worker_channel not in (None, event.worker_channel):
        # The queue starts a request on one worker; should a second ever start it too, only
        # the first one's stream is the answer.
        logger.warning("run %s was started twice: stopping the second", run.run_id)
        return [Cancel(event.worker_channel, event.request_id)]
    run.worker_channel = event.worker_channel
    run.accepted_at = now
    run.seq_at_accept = run.next_seq
    run.queued = None
    actions: list[Action] = []
    if run.next_seq == 1:  # nothing shown yet: the page says it is being read
        actions.append(ShowStarted())
    actions.append(Taken(event.worker_channel, event.request_id))
    if run.stop_code is not None:  # stopped while queued: the engine must not go on
        actions.extend(stop_upstream(run))
    return actions


def _delta(run: Run, delta: Delta, *, now: float) -> list[Action]:
    if delta.seq < run.next_seq:
        return []  # a repeat (a retried send): already have it
    if delta.seq > run.next_seq:
        # Events were lost (Redis restarted under the stream): the text has a hole.
        return [*stop_upstream(run), End(lost_end(seq=run.next_seq))]
    if run.clock is not None and run.clock.relay_first_delta is None:
        run.clock.relay_first_delta = now
    run.completion_tokens += delta.tokens
    return [Append(LoggedDelta(seq=delta.seq, text=delta.text, logprobs=delta.logprobs))]
