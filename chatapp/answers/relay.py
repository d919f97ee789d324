"""The owner of every run a web process starts, for as long as it generates.

Sockets come and go (a refresh, a network blip, another tab); the run does not follow them.
The relay receives the worker's events on its own channel and, for each one, logs the entry
(for resume) and sends it to every watcher; at the end it writes the message once (fenced by
the run id) and frees the admission slot. While it runs it renews the run's admission lease
and ownership every heartbeat, so a relay that dies with its process frees both within a few
heartbeats. It also fails runs nobody is producing any more: no worker took the request
(`no_worker`), the worker went silent (`worker_lost`), or part of the stream was lost in
transit (`interrupted`); and it aborts a run nobody has watched for the grace period. One
relay per web process (per event loop), created on first use.

Nothing slow runs in the receive loop: the final write of a run runs in a task of its own (on
a thread of its own), so one slow database write never holds up other runs' events.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

from chatapp.admission.limiter import Admission, Lease
from chatapp.answers.entries import LogEntry, LoggedDelta, LoggedEnd, text_of
from chatapp.answers.log import AnswerLog
from chatapp.answers.messages import (
    AnswerAlive,
    AnswerEntry,
    AnswerGone,
    AnswerStarted,
    AttachAnswer,
    DetachAnswer,
    relay_control_adapter,
)
from chatapp.answers.recovery import Orphans, answer_store, orphaned_runs_finish
from chatapp.answers.run_timeouts import Due, RunTimes, timeout_end, timeouts_due
from chatapp.answers.timeline import FirstTokenClock
from chatapp.metrics import recording as metrics
from inference.wire import retry
from inference.wire.affinity import AffinityMap, route
from inference.wire.protocol import (
    Accepted,
    CancelRequest,
    Delta,
    Done,
    Error,
    GenerateRequest,
    Heartbeat,
    stats_of,
    worker_event_adapter,
)
from inference.wire.registry import WorkerRegistry
from inference.wire.request_queue import RequestQueue, moved_queue

logger = logging.getLogger(__name__)

# Worker error codes as the browser sees them (docs/protocol.md).
_WORKER_ERRORS = {
    "engine": "engine",
    "invalid_request": "invalid",
    "context_length": "too_long",
    "overloaded": "busy",
    "internal": "worker_lost",
}


class ChannelLayer(Protocol):
    async def send(self, channel: str, message: dict[str, Any]) -> None: ...

    async def receive(self, channel: str) -> dict[str, Any]: ...

    async def new_channel(self, prefix: str = ...) -> str: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RelaySettings:
    accept_timeout_s: float  # no worker took the request within this: no_worker
    queue_timeout_s: float  # workers are alive but busy: wait this long in their queue
    stall_timeout_s: float  # accepted, then silent this long: worker_lost
    # accepted, heartbeats coming, and still no first token after this long: timeout (a wait
    # ends with a typed error, never an endless spinner); 0: no bound
    first_token_timeout_s: float = 0.0
    disconnect_grace_s: float  # nobody watching this long: abort the generation
    heartbeat_s: float  # how often watchers, the log and admission hear the relay is alive
    reap_every_s: float  # how often runs orphaned by a dead web process are ended
    owner_silent_after_s: float  # an owner not heard from this long is dead
    # a request routed to its conversation's last worker that it has not taken this long is
    # moved to the shared queue (inference/wire/affinity.py)
    affinity_wait_s: float = 1.0
    # an answer whose worker died goes on on another worker at most this often (0: it fails
    # `worker_lost` at once, as before)
    max_migrations: int = 2


@dataclass
class _Run:
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


class AnswerRelay:
    def __init__(
        self,
        *,
        layer: ChannelLayer,
        log: AnswerLog,
        admission: Admission,
        registry: WorkerRegistry,
        queue: RequestQueue,
        settings: RelaySettings,
        affinity: AffinityMap | None = None,
    ) -> None:
        self._layer = layer
        self._queue = queue
        self._affinity = affinity  # None: no routing affinity
        self._log = log
        self._admission = admission
        self._registry = registry
        self._settings = settings
        self._runs: dict[uuid.UUID, _Run] = {}
        self._tasks: set[asyncio.Task[None]] = set()  # final writes, worker records
        self._running = False
        self.channel = ""
        self.ready = asyncio.Event()
        # Appending to a run's memory and to its log happen together under this lock, so a
        # heartbeat that compares the two never sees one ahead of the other.
        self._log_lock = asyncio.Lock()
        self._lost_checked_at = 0.0  # monotonic: the last look for requests Redis lost
        # one per process: it remembers which runs it has seen without an owner record, and since
        # when (recovery.orphan_verdict)
        self.orphans = Orphans(
            log=log,
            admission=admission,
            layer=layer,
            silent_after_s=settings.owner_silent_after_s,
            owned_here=self.owns,
        )
        metrics.relay_started(self)

    @property
    def active_answers(self) -> int:
        return len(self._runs)

    async def run(self) -> None:
        # The default prefix: channels_redis lets one receiver per prefix hold the process's read
        # lock, so a prefix of our own would starve the sockets' channels (and vice versa).
        self.channel = await self._layer.new_channel()
        self.ready.set()
        self._running = True
        s = self._settings
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._receive_loop())
                # Three loops, so none waits behind another: above all the heartbeat never
                # waits behind the reaper's database read (a stalled database must not make
                # other processes think this one's live answers lost their owner).
                group.create_task(self._every(self._tick_s(), self._check_timeouts, "timeouts"))
                group.create_task(self._every(s.heartbeat_s, self._heartbeat, "heartbeat"))
                group.create_task(self._every(s.reap_every_s, self._reap, "reaper"))
        finally:
            self._running = False  # its runs are orphans now, like a dead process's

    # ---- called by whoever starts a run (a socket, an API request) ----------------------

    async def start(
        self,
        *,
        message_id: uuid.UUID,
        user_key: str,
        watcher: str,
        request: GenerateRequest,
        request_channel: str,
        clock: FirstTokenClock | None = None,
        stored: asyncio.Future[bool] | None = None,
        finish_unwatched: bool = False,
    ) -> None:
        """Own run `request.request_id` of the message, then send the request (built with
        `reply_channel=self.channel`). `finish_unwatched`: generate to the end even when
        nobody watches (an API client that will retry with its Idempotency-Key).

        The caller holds an admission slot under the run id; the relay renews it while the
        run lasts and frees it when the run ends, however it ends.
        """
        assert request.reply_channel == self.channel, "workers must answer this relay"
        run = _Run(
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
        self._runs[run.run_id] = run
        try:
            await self._log.begin(run_id=run.run_id, relay_channel=self.channel, user_key=user_key)
        except Exception:  # resume is lost for this run (until a heartbeat rewrites it)
            logger.exception("could not start the log of run %s", run.run_id)
        try:
            queue = await self._route(run)
            entry_id = await self._queue.put(queue, run.request)
            run.queued, run.queued_message = (queue, entry_id), run.request
            if clock is not None:
                clock.queued = time.monotonic()
        except Exception as exc:
            logger.warning("could not queue run %s: %s", run.run_id, exc)
            await self._end(
                run,
                LoggedEnd(
                    seq=run.next_seq,
                    status="failed",
                    error_code="busy",
                    error_message="The assistant is overloaded right now. Please try again.",
                ),
            )

    async def _route(self, run: _Run) -> str:
        return await route(
            queue=run.shared_queue,
            session_id=run.session_id,
            affinity=self._affinity,
            registry=self._registry,
        )

    def owns(self, run_id: uuid.UUID) -> bool:
        """This relay is running and runs `run_id`."""
        return self._running and run_id in self._runs

    # ---- inbound: worker events and watcher control -------------------------------------

    async def _receive_loop(self) -> None:
        backoff = retry.RECEIVE.start()
        while True:
            try:
                raw = await self._layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis restarting: keep trying, runs fail by watchdog
                logger.warning("relay receive failed (%s); retrying", exc)
                await backoff.sleep()
                continue
            backoff.reset()
            try:
                await self._dispatch(raw)
            except Exception:
                logger.exception("relay failed on a %r message", raw.get("type"))

    async def _dispatch(self, raw: dict[str, Any]) -> None:
        kind = str(raw.get("type", ""))
        try:
            if kind.startswith("answer."):
                control = relay_control_adapter.validate_python(raw)
                if isinstance(control, AttachAnswer):
                    await self._attach(control)
                elif isinstance(control, DetachAnswer):
                    self._detach(control)
                else:
                    await self.stop(control.run_id)
                return
            event = worker_event_adapter.validate_python(raw)
        except ValidationError:
            logger.warning("relay dropped a malformed %r message", kind)
            return
        run = self._live(event.request_id)
        if run is None:
            if isinstance(event, Accepted):  # we gave up on it: free the engine
                await self._send(
                    event.worker_channel, CancelRequest(request_id=event.request_id).to_channel()
                )
            elif isinstance(event, Heartbeat):  # a worker we moved away from still runs it
                left = self._left_behind_by(event.request_id)
                if left is not None:
                    await self._send(left, CancelRequest(request_id=event.request_id).to_channel())
            return
        run.last_event = time.monotonic()
        if isinstance(event, Accepted):
            if run.worker_channel not in (None, event.worker_channel):
                # The queue starts a request on one worker; should a second ever start it
                # too, only the first one's stream is the answer.
                logger.warning("run %s was started twice: stopping the second", run.run_id)
                await self._send(
                    event.worker_channel, CancelRequest(request_id=event.request_id).to_channel()
                )
                return
            run.worker_channel = event.worker_channel
            run.accepted_at = time.monotonic()
            run.seq_at_accept = run.next_seq
            run.queued = None
            if run.next_seq == 1:  # nothing shown yet: the page says it is being read
                started = AnswerStarted(message_id=run.message_id, run_id=run.run_id)
                await self._to_watchers(run, started.to_channel())
            if self._affinity is not None and run.session_id is not None:
                self._background(self._remember(run.session_id, event.worker_channel))
            # Off the receive loop: the first delta often follows at once (a FAQ answer).
            self._background(
                self._worker_record(run.run_id, event.worker_channel, event.request_id)
            )
            if run.stop_code is not None:
                await self._cancel_upstream(run)
        elif isinstance(event, Heartbeat):
            pass
        elif isinstance(event, Delta):
            await self._on_delta(run, event)
        elif isinstance(event, Done):
            if event.seq > run.next_seq:  # the last deltas never came: not complete
                await self._end_lost(run)
                return
            await self._end(run, self._end_of_done(run, event))
        elif isinstance(event, Error):
            await self._end(
                run,
                LoggedEnd(
                    seq=run.next_seq,
                    status="failed",
                    error_code=_WORKER_ERRORS.get(event.code, "engine"),
                    error_message=event.message,
                ),
            )

    async def _remember(self, session_id: str, worker_channel: str) -> None:
        assert self._affinity is not None
        try:
            await self._affinity.remember(session_id, worker_channel)
        except Exception as exc:  # the next turn goes to any worker: slower, not wrong
            logger.warning("could not remember the worker of session %s: %s", session_id, exc)

    async def _move_to_shared(self, run: _Run) -> None:
        """A request its conversation's worker did not take in time goes to every worker."""
        assert run.queued is not None
        queue, entry_id = run.queued
        if not await self._queue.withdraw(queue, entry_id):
            return  # that worker accepted it meanwhile: its `accepted` is on the way
        if run.worker_channel is not None or run.ending:
            return
        run.queued = (run.shared_queue, await self._queue.put(run.shared_queue, run.request))
        run.queued_message = run.request
        logger.info("run %s: moved from %s to the shared queue", run.run_id, queue)

    async def _withdraw(self, run_id: uuid.UUID, queue: str, entry_id: str) -> None:
        try:
            await self._queue.withdraw(queue, entry_id)
        except Exception as exc:  # a worker that takes it later is sent a cancel on `accepted`
            logger.warning("could not take run %s off the queue: %s", run_id, exc)

    async def _worker_record(self, run_id: uuid.UUID, worker_channel: str, request_id: str) -> None:
        try:
            await self._log.worker_taken(
                run_id=run_id, worker_channel=worker_channel, request_id=request_id
            )
        except Exception as exc:  # only a dead owner's cleanup needs it
            logger.warning("could not record the worker of run %s: %s", run_id, exc)

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)  # held until done: the loop keeps only weak references
        task.add_done_callback(self._tasks.discard)

    def _run_of(self, request_id: str) -> _Run | None:
        """The run a worker request (`<run>` or `<run>~<n>`) belongs to, if it is ours."""
        try:
            return self._runs.get(uuid.UUID(request_id.partition("~")[0]))
        except ValueError:
            return None

    def _left_behind_by(self, request_id: str) -> str | None:
        """The worker of a request its run moved away from (None: not such a request)."""
        run = self._run_of(request_id)
        return None if run is None else run.left_behind.get(request_id)

    def _live(self, request_id: str) -> _Run | None:
        """The running run whose current worker request this is (an event of a worker the
        run migrated away from is not its own any more)."""
        run = self._run_of(request_id)
        if run is None or run.ending or request_id != run.upstream_id:
            return None
        return run

    async def _on_delta(self, run: _Run, delta: Delta) -> None:
        if delta.seq < run.next_seq:
            return  # a repeat (a retried send): already have it
        if delta.seq > run.next_seq:
            # Events were lost (Redis restarted under the stream): the text has a hole.
            await self._cancel_upstream(run)
            await self._end_lost(run)
            return
        if run.clock is not None and run.clock.relay_first_delta is None:
            run.clock.relay_first_delta = time.monotonic()
        entry = LoggedDelta(seq=delta.seq, text=delta.text, logprobs=delta.logprobs)
        run.completion_tokens += delta.tokens
        await self._record(run, entry)
        await self._broadcast(run, entry)

    async def _end_lost(self, run: _Run) -> None:
        await self._end(
            run,
            LoggedEnd(
                seq=run.next_seq,
                status="failed",
                error_code="interrupted",
                error_message=(
                    "Part of the answer was lost in transit. What arrived is kept; "
                    "please ask again."
                ),
            ),
        )

    def _end_of_done(self, run: _Run, done: Done) -> LoggedEnd:
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

    async def _attach(self, attach: AttachAnswer) -> None:
        run = self._runs.get(attach.run_id)
        if run is None:
            await self._send(
                attach.watcher,
                AnswerGone(message_id=attach.message_id, run_id=attach.run_id).to_channel(),
            )
            return
        run.watchers.add(attach.watcher)
        run.unwatched_since = None
        # Sequential with the worker's events: nothing between this replay and the live ones.
        # An ending run's end goes out once it is stored (see _finish).
        for entry in run.entries[attach.after_seq :]:
            if run.ending and isinstance(entry, LoggedEnd):
                break
            await self._send(
                attach.watcher,
                AnswerEntry(message_id=run.message_id, run_id=run.run_id, entry=entry).to_channel(),
            )

    def _detach(self, detach: DetachAnswer) -> None:
        run = self._runs.get(detach.run_id)
        if run is None:
            return
        run.watchers.discard(detach.watcher)
        if not run.watchers:
            run.unwatched_since = time.monotonic()

    async def stop(self, run_id: uuid.UUID, *, code: str = "") -> bool:
        """Abort the generation; the worker answers `done` (abort) and the run ends stopped."""
        run = self._runs.get(run_id)
        if run is None:
            return False
        if run.ending:
            return True
        if run.stop_code is None:
            run.stop_code = code
        if run.worker_channel is None:
            # Still queued: end it now; if a worker takes it later, `accepted` gets a cancel.
            await self._end(
                run,
                LoggedEnd(
                    seq=run.next_seq, status="stopped", finish_reason="abort", error_code=code
                ),
            )
            return True
        await self._cancel_upstream(run)
        return True

    # ---- periodic: watchdogs, grace period, heartbeats, orphan reaping ------------------

    def _tick_s(self) -> float:
        s = self._settings
        return min(
            s.accept_timeout_s / 3, s.stall_timeout_s / 3, s.heartbeat_s, s.affinity_wait_s, 1.0
        )

    async def _every(self, interval: float, work: Callable[[], Awaitable[None]], what: str) -> None:
        while True:
            try:
                await work()
            except Exception:  # Redis or the database away: try again next time
                logger.exception("relay %s failed", what)
            await asyncio.sleep(interval)

    async def _reap(self) -> None:
        await orphaned_runs_finish(orphans=self.orphans)

    async def _check_timeouts(self) -> None:
        now = time.monotonic()
        if now - self._lost_checked_at >= self._settings.heartbeat_s:
            self._lost_checked_at = now
            await self._requeue_lost()
        gone = await self._workers_gone()
        for run in [r for r in self._runs.values() if not r.ending]:
            times = RunTimes(
                silent_s=now - run.last_event,
                accepted=run.worker_channel is not None,
                on_own_queue=run.queued is not None
                and run.queued[0] not in (run.shared_queue, moved_queue(run.shared_queue)),
                worker_gone=run.worker_channel in gone,
                since_accept_s=None
                if run.accepted_at is None or run.worker_channel is None
                else now - run.accepted_at,
                wrote_since_accept=run.next_seq > run.seq_at_accept,
                unwatched_s=None if run.unwatched_since is None else now - run.unwatched_since,
                stopping=run.stop_code is not None,
                finish_unwatched=run.finish_unwatched,
            )
            for due in timeouts_due(times, self._settings):
                await self._on_due(run, due)

    async def _on_due(self, run: _Run, due: Due) -> None:
        """Do what a run's expired bound calls for (`run_timeouts.timeouts_due`)."""
        if due == "to_shared":
            try:
                await self._move_to_shared(run)
            except Exception as exc:  # Redis away: tried again next tick
                logger.warning("could not move run %s to the shared queue: %s", run.run_id, exc)
            return
        if due == "grace_over":
            logger.info("nobody came back for run %s: aborting it", run.run_id)
            await self.stop(run.run_id, code="client_disconnected")
            return
        if due == "unstarted" and await self._registry.capacity() > 0:
            return  # queued behind other answers of live workers: keep waiting
        if due in ("worker_lost", "first_token"):
            await self._cancel_upstream(run)  # in case it is alive but cut off
        if due == "worker_lost" and await self._migrate(run):
            return
        end = timeout_end(due, seq=run.next_seq, bounds=self._settings, has_text=run.next_seq > 1)
        await self._end(run, end)

    async def _requeue_lost(self) -> None:
        """Put again the requests no worker took that Redis lost (it restarted without
        persistence): otherwise they would wait for nothing and end `no_worker` or `busy`.
        On the timeouts loop, like `_move_to_shared`, so the two never race."""
        for run in [r for r in self._runs.values() if r.queued and r.worker_channel is None]:
            assert run.queued is not None
            queue, entry_id = run.queued
            if run.ending or not await self._queue.lost(queue, entry_id):
                continue
            run.queued = (queue, await self._queue.put(queue, run.queued_message))
            logger.warning("run %s: its queued request was lost; queued again", run.run_id)

    async def _workers_gone(self) -> set[str]:
        """Workers of running answers that left the registry (killed: they stopped announcing
        themselves), so their answers migrate within a few worker heartbeats instead of
        waiting for the stall timeout."""
        serving = {r.worker_channel for r in self._runs.values() if r.worker_channel}
        if not serving or not self._settings.max_migrations:
            return set()
        try:
            live = await self._registry.live_workers()
        except Exception:  # the stall timeout still catches them
            return set()
        if not live:
            # nobody at all: the registry was lost (Redis restarted without persistence), not
            # every worker at once; they announce themselves again within a heartbeat, and
            # the stall timeout still catches a worker that really died
            return set()
        return {worker for worker in serving if worker not in live}

    async def _migrate(self, run: _Run) -> bool:
        """Go on with a run whose worker died on another worker, from the text already
        streamed (it is the open assistant turn of the new prompt, and the new worker counts
        on from the next seq), so the user sees one answer with no gap and no repeat. False
        when it cannot (stopped, migrated too often, a half-written JSON answer, nobody to
        take it)."""
        s = self._settings
        if run.stop_code is not None or run.migrations >= s.max_migrations or not run.request:
            return False
        try:
            live = await self._registry.live_workers()
        except Exception:
            return False
        # a worker that is draining (capacity 0) takes nothing: it is no other worker
        others = {w for w, capacity in live.items() if capacity > 0} - {run.worker_channel}
        if not others:  # nobody else could take it: it fails with the text it has
            return False
        original = GenerateRequest.model_validate(run.request)
        if original.sampling.response_format is not None and text_of(run.entries):
            # a structured answer cannot go on from half a document (the new worker's grammar
            # starts a second one): it fails clearly, as Dynamo does
            return False
        limit = original.sampling.max_tokens
        if limit and limit - run.completion_tokens < 1:
            return False  # it had said all it was allowed to
        if run.worker_channel is not None:
            run.left_behind[run.upstream_id] = run.worker_channel
        run.migrations += 1
        request = original.model_copy(  # the same sampling: the worker counts what is left
            update={
                "request_id": run.upstream_id,
                "continue_from": text_of(run.entries),
                "first_seq": run.next_seq,
                "continued_tokens": run.completion_tokens,
                "faq_lookup": None,
                "submitted_at": time.time(),
            }
        )
        lost = run.worker_channel
        run.worker_channel = None
        run.last_event = time.monotonic()
        try:  # ahead of the questions that came after it
            moved = moved_queue(run.shared_queue)
            run.queued_message = request.to_channel()
            run.queued = (moved, await self._queue.put(moved, run.queued_message))
        except Exception as exc:
            logger.warning("could not queue the migration of run %s: %s", run.run_id, exc)
            return False  # fails as worker_lost
        metrics.answer_migrated()
        logger.warning(
            "worker %s of run %s was lost after %d entries: going on on another worker",
            lost,
            run.run_id,
            len(run.entries),
        )
        return True

    async def _heartbeat(self) -> None:
        await self._heartbeat_runs()
        metrics.admission_sampled(in_flight=await self._admission.outstanding())

    async def _heartbeat_runs(self) -> None:
        runs = list(self._runs.values())
        for run in runs:
            alive = AnswerAlive(message_id=run.message_id, run_id=run.run_id).to_channel()
            for watcher in list(run.watchers):
                await self._send(watcher, alive)
        try:
            await self._admission.renew(
                leases=[Lease(request_id=r.request_id, user_key=r.user_key) for r in runs]
            )
        except Exception as exc:  # the leases last a few heartbeats: the next one may work
            logger.warning("could not renew %d admission leases: %s", len(runs), exc)
        async with self._log_lock:
            broken = await self._log.heartbeat(
                relay_channel=self.channel, lengths={r.run_id: len(r.entries) for r in runs}
            )
            for run_id in broken:  # Redis restarted under it: write it again from memory
                owned = self._runs.get(run_id)
                if owned is None:
                    continue
                logger.warning("the log of run %s is incomplete; writing it again", run_id)
                await self._log.rewrite(
                    run_id=run_id,
                    relay_channel=self.channel,
                    user_key=owned.user_key,
                    entries=owned.entries,
                )
                if owned.worker_channel:
                    await self._log.worker_taken(
                        run_id=run_id,
                        worker_channel=owned.worker_channel,
                        request_id=owned.upstream_id,
                    )

    # ---- helpers -----------------------------------------------------------------------

    async def _record(self, run: _Run, entry: LogEntry) -> None:
        async with self._log_lock:
            run.entries.append(entry)
            try:
                await self._log.append(run_id=run.run_id, entry=entry)
            except Exception as exc:  # live watchers still get it; a heartbeat rewrites the log
                logger.warning("could not log seq %d of run %s: %s", entry.seq, run.run_id, exc)

    async def _broadcast(self, run: _Run, entry: LogEntry) -> None:
        entry_message = AnswerEntry(message_id=run.message_id, run_id=run.run_id, entry=entry)
        await self._to_watchers(run, entry_message.to_channel())

    async def _to_watchers(self, run: _Run, message: dict[str, Any]) -> None:
        for watcher in list(run.watchers):
            await self._send(watcher, message)

    async def _end(self, run: _Run, end: LoggedEnd) -> None:
        if run.ending or self._runs.get(run.run_id) is not run:
            return  # ended already
        run.ending = True
        if run.queued is not None and run.worker_channel is None:
            # no worker took it yet: take it off the queue so none starts it later
            self._background(self._withdraw(run.run_id, *run.queued))
        metrics.answer_ended(end, faq_lookup=run.faq_lookup, elapsed_s=_since(run))
        await self._record(run, end)
        self._background(self._finish(run, end))

    async def _finish(self, run: _Run, end: LoggedEnd) -> None:
        """Store, free the slot, then tell the watchers: a reload right after shows it stored,
        and the user can ask again at once. The run stays owned (heartbeats go on) until then.
        A run queued before its row was written waits for the write; one whose row never was
        (`stored` False) has nothing to store."""
        try:
            if run.stored is None or await asyncio.shield(run.stored):
                await answer_store(
                    message_id=run.message_id,
                    run_id=run.run_id,
                    content=text_of(run.entries),
                    end=end,
                )
        except Exception:  # the log has the end: the orphan reaper stores it later
            logger.exception("could not store run %s of answer %s", run.run_id, run.message_id)
        try:
            await self._admission.release(request_id=run.request_id, user_key=run.user_key)
        except Exception as exc:  # the lease expires on its own a few heartbeats later
            logger.warning("could not release the lease of run %s: %s", run.run_id, exc)
        self._runs.pop(run.run_id, None)
        await self._broadcast(run, end)

    async def _cancel_upstream(self, run: _Run) -> None:
        if run.worker_channel is not None:
            await self._send(
                run.worker_channel, CancelRequest(request_id=run.upstream_id).to_channel()
            )

    async def _send(self, channel: str, message: dict[str, Any]) -> None:
        try:
            await self._layer.send(channel, message)
        except Exception as exc:  # a full or vanished channel: the watcher resyncs on a gap
            logger.warning("send to %s failed: %s", channel, exc)


def _since(run: _Run) -> float:
    return time.monotonic() - run.started_at
