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
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError

from chatapp.admission.limiter import Admission, Lease
from chatapp.answers.entries import LoggedEnd, text_of
from chatapp.answers.log import AnswerLog
from chatapp.answers.messages import (
    AnswerStarted,
    AttachAnswer,
    DetachAnswer,
    relay_control_adapter,
)
from chatapp.answers.placement import RunPlacement
from chatapp.answers.recovery import (
    Orphans,
    answer_store,
    lease_release,
    orphaned_runs_finish,
)
from chatapp.answers.run_ends import stopped_end, unqueued_end
from chatapp.answers.run_events import (
    Action,
    Append,
    Cancel,
    ShowStarted,
    Taken,
    stop_upstream,
    worker_event_actions,
)
from chatapp.answers.run_output import RunOutput
from chatapp.answers.run_state import Run, RunTable
from chatapp.answers.run_timeouts import Due, RunTimes, timeout_end, timeouts_due
from chatapp.answers.timeline import FirstTokenClock
from chatapp.handoff import intents
from chatapp.metrics import recording as metrics
from inference.wire import retry
from inference.wire.affinity import AffinityMap
from inference.wire.protocol import CancelRequest, GenerateRequest, worker_event_adapter
from inference.wire.registry import WorkerRegistry
from inference.wire.request_queue import RequestQueue
from inference.wire.transport import receive_retrying

logger = logging.getLogger(__name__)


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
        self._placement = RunPlacement(
            queue=queue,
            registry=registry,
            affinity=affinity,
            max_migrations=settings.max_migrations,
        )
        self._output = RunOutput(layer=layer, log=log)
        self._admission = admission
        self._registry = registry
        self._settings = settings
        self._runs = RunTable()
        self._tasks: set[asyncio.Task[None]] = set()  # final writes, worker records
        self._running = False
        self.channel = ""
        self.ready = asyncio.Event()
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
                group.create_task(_every(self._tick_s(), self._check_timeouts, "timeouts"))
                group.create_task(_every(s.heartbeat_s, self._heartbeat, "heartbeat"))
                group.create_task(_every(s.reap_every_s, self._reap, "reaper"))
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
        run = Run.for_request(
            request,
            message_id=message_id,
            user_key=user_key,
            watcher=watcher,
            request_channel=request_channel,
            clock=clock,
            stored=stored,
            finish_unwatched=finish_unwatched,
        )
        self._runs[run.run_id] = run
        await self._output.begin(run, relay_channel=self.channel)
        try:
            await self._placement.queue(run)
            if clock is not None:
                clock.queued = time.monotonic()
        except Exception as exc:
            logger.warning("could not queue run %s: %s", run.run_id, exc)
            await self._end(run, unqueued_end(seq=run.next_seq))

    def owns(self, run_id: uuid.UUID) -> bool:
        """This relay is running and runs `run_id`."""
        return self._running and run_id in self._runs

    # ---- inbound: worker events and watcher control -------------------------------------

    async def _receive_loop(self) -> None:
        while True:
            raw = await receive_retrying(self._layer, self.channel)
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
                    await self._output.attach(self._runs.get(control.run_id), control)
                elif isinstance(control, DetachAnswer):
                    self._output.detach(self._runs.get(control.run_id), watcher=control.watcher)
                else:
                    await self.stop(control.run_id)
                return
            event = worker_event_adapter.validate_python(raw)
        except ValidationError:
            logger.warning("relay dropped a malformed %r message", kind)
            return
        run = self._runs.live(event.request_id)
        left_behind = self._runs.left_behind_by(event.request_id) if run is None else None
        now = time.monotonic()
        await self._carry_out(
            run, worker_event_actions(run, event, now=now, left_behind=left_behind)
        )

    async def _carry_out(self, run: Run | None, actions: list[Action]) -> None:
        """Do what the run's transition (`run_events.py`) decided, in order."""
        for action in actions:
            if isinstance(action, Cancel):
                cancel = CancelRequest(request_id=action.request_id)
                await self._output.send(action.worker_channel, cancel.to_channel())
            elif run is None:
                continue  # every other action is about a run of ours
            elif isinstance(action, Append):
                await self._output.record(run, action.entry)
                await self._output.broadcast(run, action.entry)
            elif isinstance(action, ShowStarted):
                started = AnswerStarted(message_id=run.message_id, run_id=run.run_id)
                await self._output.to_watchers(run, started.to_channel())
            elif isinstance(action, Taken):
                if self._placement.remembers and run.session_id is not None:
                    self._background(
                        self._placement.remember(run.session_id, action.worker_channel)
                    )
                # Off the receive loop: the first delta often follows at once (a FAQ answer).
                self._background(
                    self._output.worker_taken(run.run_id, action.worker_channel, action.request_id)
                )
            else:
                await self._end(run, action.end)

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)  # held until done: the loop keeps only weak references
        task.add_done_callback(self._tasks.discard)

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
            await self._end(run, stopped_end(seq=run.next_seq, code=code))
            return True
        await self._cancel_upstream(run)
        return True

    # ---- periodic: watchdogs, grace period, heartbeats, orphan reaping ------------------

    def _tick_s(self) -> float:
        s = self._settings
        return min(
            s.accept_timeout_s / 3, s.stall_timeout_s / 3, s.heartbeat_s, s.affinity_wait_s, 1.0
        )

    async def _reap(self) -> None:
        await orphaned_runs_finish(orphans=self.orphans)

    async def _check_timeouts(self) -> None:
        now = time.monotonic()
        if now - self._lost_checked_at >= self._settings.heartbeat_s:
            self._lost_checked_at = now
            await self._placement.requeue_lost(list(self._runs.values()))
        gone = await self._placement.workers_gone(list(self._runs.values()))
        for run in [r for r in self._runs.values() if not r.ending]:
            times = RunTimes.of(
                run,
                now=now,
                worker_gone=run.worker_channel in gone,
                on_own_queue=self._placement.on_own_queue(run),
            )
            for due in timeouts_due(times, self._settings):
                await self._on_due(run, due)

    async def _on_due(self, run: Run, due: Due) -> None:
        """Do what a run's expired bound calls for (`run_timeouts.timeouts_due`)."""
        if due == "to_shared":
            try:
                await self._placement.move_to_shared(run)
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
        if due == "worker_lost" and await self._placement.migrate(run):
            return
        end = timeout_end(due, seq=run.next_seq, bounds=self._settings, has_text=run.next_seq > 1)
        await self._end(run, end)

    async def _heartbeat(self) -> None:
        await self._heartbeat_runs()
        metrics.admission_sampled(in_flight=await self._admission.outstanding())

    async def _heartbeat_runs(self) -> None:
        runs = list(self._runs.values())
        await self._output.heartbeat(runs, relay_channel=self.channel, owned=self._runs.get)
        try:
            await self._admission.renew(
                leases=[Lease(request_id=r.request_id, user_key=r.user_key) for r in runs]
            )
        except Exception as exc:  # the leases last a few heartbeats: the next one may work
            logger.warning("could not renew %d admission leases: %s", len(runs), exc)

    # ---- helpers -----------------------------------------------------------------------

    async def _end(self, run: Run, end: LoggedEnd) -> None:
        if run.ending or self._runs.get(run.run_id) is not run:
            return  # ended already
        run.ending = True
        if run.queued is not None and run.worker_channel is None:
            # no worker took it yet: take it off the queue so none starts it later
            self._background(self._placement.withdraw(run.run_id, *run.queued))
        metrics.answer_ended(end, faq_lookup=run.faq_lookup, elapsed_s=_since(run))
        await self._output.record(run, end)
        self._background(self._finish(run, end))

    async def _finish(self, run: Run, end: LoggedEnd) -> None:
        """Store, free the slot, then tell the watchers: a reload right after shows it stored,
        and the user can ask again at once. The run stays owned (heartbeats go on) until then.
        A run queued before its row was written waits for the write; one whose row never was
        (`stored` False) has nothing to store."""
        try:
            if run.stored is None or await asyncio.shield(run.stored):
                content = text_of(run.entries)
                await answer_store(
                    message_id=run.message_id, run_id=run.run_id, content=content, end=end
                )
        except Exception:  # the log has the end: the orphan reaper stores it later
            logger.exception("could not store run %s of answer %s", run.run_id, run.message_id)
        await lease_release(self._admission, run_id=run.run_id, user_key=run.user_key)
        self._runs.pop(run.run_id, None)
        if offers_person(run, end):
            end = end.model_copy(update={"offer_person": True})
        await self._output.broadcast(run, end)

    async def _cancel_upstream(self, run: Run) -> None:
        await self._carry_out(run, stop_upstream(run))


def offers_person(run: Run, end: LoggedEnd) -> bool:
    """Offer a person under a model's complete answer that says it cannot help, or whose
    question asked for one (a new conversation's first message: a follow-up asking is made
    an ask before the assistant is woken, `realtime/handoff_socket.py`). A few hundredths of
    a ms (`intents`); never fails an end."""
    if end.status != "complete" or end.source != "model":
        return False
    question = next(
        (
            m.get("content", "")
            for m in reversed(run.request.get("messages", []))
            if m.get("role") == "user"
        ),
        "",
    )
    try:
        return intents.cannot_help(text_of(run.entries)) or intents.asks_for_person(question)
    except Exception:
        logger.exception("could not tell whether to offer a person under %s", run.message_id)
        return False


def _since(run: Run) -> float:
    return time.monotonic() - run.started_at


async def _every(interval: float, work: Callable[[], Awaitable[None]], what: str) -> None:
    while True:
        retry.stop_if_cancelled()  # redis-py can swallow the cancel that stops the relay
        try:
            await work()
        except Exception:  # Redis or the database away: try again next time
            logger.exception("relay %s failed", what)
        await asyncio.sleep(interval)
