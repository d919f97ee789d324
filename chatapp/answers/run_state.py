"""The state of one run its relay owns (`relay.py`): who watches it, what it streamed, where
its request waits or which worker serves it, and how it is ending. One owner: the relay (and
`placement.py`, which it calls to queue, move and migrate the run's request)."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from chatapp.answers.entries import LogEntry
from chatapp.answers.timeline import FirstTokenClock
from inference.wire.protocol import GenerateRequest


@dataclass
class Run:
    """One run a relay owns: what its watchers, its log and its worker request are."""

    message_id: uuid.UUID
    run_id: uuid.UUID
    user_key: str
    watchers: set[str]
    entries: list[LogEntry] = field(default_factory=list)
    worker_channel: str | None = None
    # why we asked the worker to stop: "" the user's Stop, "client_disconnected" the grace ran out
    stop_code: str | None = None
    last_event: float = field(default_factory=time.monotonic)
    unwatched_since: float | None = None
    faq_lookup: bool = False  # the request asked the FAQ cache first
    queued: tuple[str, str] | None = None  # (queue, entry id) until a worker accepts it
    shared_queue: str = ""  # where any worker takes it (`queued` may be one worker's own)
    request: dict[str, Any] = field(default_factory=dict)  # as put, to move it
    queued_message: dict[str, Any] = field(default_factory=dict)  # what `queued` holds
    session_id: str | None = None
    started_at: float = field(default_factory=time.monotonic)
    ending: bool = False  # its end is logged; the final write is under way
    migrations: int = 0  # times it went on on another worker after its worker died
    finish_unwatched: bool = False  # a client said it will retry (Idempotency-Key): no abort
    completion_tokens: int = 0  # generated so far, over all its workers
    accepted_at: float | None = None  # monotonic: a worker started it (its latest worker)
    seq_at_accept: int = 1  # next_seq when its latest worker accepted: no token from it yet
    # worker requests it moved away from -> their worker: one still heard from is cancelled
    left_behind: dict[str, str] = field(default_factory=dict)
    clock: FirstTokenClock | None = None  # marked here: queued, first delta received
    # resolved by whoever started the run once its row is written (True) or not (False): the
    # request was queued before the row existed (`runs.send_run_start`); None: it existed
    stored: asyncio.Future[bool] | None = None

    @classmethod
    def for_request(
        cls,
        request: GenerateRequest,
        *,
        message_id: uuid.UUID,
        user_key: str,
        watcher: str,
        request_channel: str,
        clock: FirstTokenClock | None,
        stored: asyncio.Future[bool] | None,
        finish_unwatched: bool,
    ) -> Run:
        """The run of a worker request about to be queued on `request_channel`."""
        return cls(
            message_id=message_id,
            run_id=uuid.UUID(request.request_id),
            user_key=user_key,
            watchers={watcher},
            faq_lookup=request.faq_lookup is not None,
            shared_queue=request_channel,
            request=request.to_channel(),
            session_id=request.session_id,
            clock=clock,
            stored=stored,
            finish_unwatched=finish_unwatched,
        )

    @property
    def next_seq(self) -> int:
        return len(self.entries) + 1

    @property
    def request_id(self) -> str:
        """The run id: its admission lease's id, and the first worker request's."""
        return str(self.run_id)

    @property
    def upstream_id(self) -> str:
        """The id of the worker request now producing it (a new one after each migration)."""
        return self.request_id if not self.migrations else f"{self.run_id}~{self.migrations}"


class RunTable(dict[uuid.UUID, Run]):
    """A relay's runs, by run id, and which of them a worker request belongs to."""

    def of_request(self, request_id: str) -> Run | None:
        """The run a worker request (`<run>` or `<run>~<n>`) belongs to, if it is here."""
        try:
            return self.get(uuid.UUID(request_id.partition("~")[0]))
        except ValueError:
            return None

    def live(self, request_id: str) -> Run | None:
        """The running run whose current worker request this is (an event of a worker the
        run migrated away from is not its own any more)."""
        run = self.of_request(request_id)
        if run is None or run.ending or request_id != run.upstream_id:
            return None
        return run

    def left_behind_by(self, request_id: str) -> str | None:
        """The worker of a request its run moved away from (None: not such a request)."""
        run = self.of_request(request_id)
        return None if run is None else run.left_behind.get(request_id)
