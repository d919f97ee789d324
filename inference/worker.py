"""The inference worker: pulls generate requests, streams coalesced deltas to the requester.

A worker takes from the shared request queue (`inference/wire/request_queue.py`) only while it has
a free slot, so several workers on one Redis share the load and a busy one leaves requests to
idle ones; it accepts a request when it starts serving it, and a request taken by a worker
that died before accepting it is served by another. Background work comes on its own queue
and holds at most `max_background` of the slots, so it never fills the engine; vLLM's priority
scheduling puts it behind chat inside the engine too. The
worker announces its capacity (running slots plus queue) in the registry, which is how the
web tier bounds the queue and tells "busy" from "no worker". Each request runs in its own
task (`inference/answering.py` answers it); cancelling that task is the abort path. Cancels
arrive on the worker's own channel, which every requester learns from `inference.accepted`.

The engine's own health check runs every `health_every_s`. A dead vLLM engine does not come
back: the worker withdraws from the registry, fails its running requests and stops (`run`
raises EngineError), and recovery is a restart of the worker (a fresh engine), which the
process supervisor or, embedded, the web server's exit does. A remote engine's failing
`/health` stops it only after `health_failures` checks in a row (`inference/engine_health.py`),
and its running answers are then handed on to other workers, not failed.

`drain` is the clean stop (SIGTERM): stop taking, hand back what was taken and not accepted,
announce a capacity of 0, let the running answers finish (up to a limit), then stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from pydantic import ValidationError

from inference import metrics
from inference.active_requests import Active, ActiveRequests
from inference.answering import Progress, RequestAnswerer
from inference.engine_health import until_unhealthy
from inference.engines.base import (
    Engine,
    EngineError,
    EngineStats,
)
from inference.faq.cache import FaqCache
from inference.faq.sync import faq_resync
from inference.intake import RequestIntake
from inference.prefill import TrimPrefills, prefill_start
from inference.presence import WorkerPresence
from inference.settings import WorkerSettings
from inference.start_warmup import engine_warm_at_start
from inference.wire.protocol import (
    FAQ_WORKERS_GROUP,
    CancelRequest,
    Error,
    FaqInSync,
    FaqRemove,
    FaqSnapshotChunk,
    FaqUpsert,
    GenerateRequest,
    PrefillRequest,
    worker_inbound_adapter,
)
from inference.wire.registry import WorkerRegistry, worker_registry
from inference.wire.request_queue import (
    RequestQueue,
    Taken,
    moved_queue,
    request_queue,
    worker_queue,
)
from inference.wire.transport import Transport, receive_retrying

logger = logging.getLogger(__name__)


class InferenceWorker:
    def __init__(
        self,
        *,
        engine: Engine,
        transport: Transport,
        settings: WorkerSettings,
        faq: FaqCache | None = None,
        registry: WorkerRegistry | None = None,
        queue: RequestQueue | None = None,
    ) -> None:
        self._engine = engine
        self._faq = faq
        self._transport = transport
        self._settings = settings
        # Redis when the worker runs on its own, the process-wide one when embedded
        self._registry = registry or worker_registry(redis_url=settings.redis_url)
        self._queue = queue or request_queue(
            redis_url=settings.redis_url, reclaim_after_s=settings.reclaim_after_s
        )
        self._intake = RequestIntake(queue=self._queue, transport=transport)
        self._pullers: list[asyncio.Task[None]] = []
        self.requests_accepted = 0  # taken from the queue and served here
        self._draining = False
        self._run_task: asyncio.Task[None] | None = None
        self._active = ActiveRequests(
            max_active=settings.max_active,
            max_background=settings.max_background,
            on_finished=self._finished,
        )
        self._answerer: RequestAnswerer | None = None  # once the worker has its channel
        self.channel: str | None = None
        self.ready = asyncio.Event()
        self._failure: str | None = None  # why the engine's health check failed
        self._engine_dead = False  # ...and whether the engine itself is gone (not a blip)
        self._presence = WorkerPresence(
            registry=self._registry,
            transport=transport,
            settings=settings,
            running=lambda: len(self._active),
            draining=lambda: self._draining,
            faq_member=faq is not None,
        )
        self._trim_prefills = TrimPrefills(engine=engine, queue=self._queue)

    @property
    def active_requests(self) -> int:
        return len(self._active)

    # ---- read by inference.metrics at scrape time ----

    @property
    def engine_key(self) -> int:
        return id(self._engine)

    def engine_stats(self) -> EngineStats:
        return self._engine.stats()

    @property
    def queued_requests(self) -> int:
        """Taken from the channel, not yet handed to the engine (FAQ lookup, rendering)."""
        in_engine = self._answerer.in_engine if self._answerer is not None else set()
        return sum(1 for request_id in self._active.ids() if request_id not in in_engine)

    @property
    def background_requests(self) -> int:
        return self._active.background

    async def run(self) -> None:
        """Serve until cancelled; on cancel, abort every running request."""
        self.channel = await self._transport.new_channel()
        self._answerer = RequestAnswerer(
            engine=self._engine,
            transport=self._transport,
            settings=self._settings,
            faq=self._faq,
            worker_channel=self.channel,
            cancelled_by_client=self._active.cancelled_by_client,
        )
        if self._faq is not None:
            # FAQ changes are broadcast to every worker; the full set comes from the web side
            # (faq_resync, at once and then periodically: broadcasts can be lost).
            await self._transport.group_add(FAQ_WORKERS_GROUP, self.channel)
        if self._settings.start_warmup_s > 0:  # before the registry knows it: no chat yet
            await engine_warm_at_start(
                engine=self._engine,
                transport=self._transport,
                ask_timeout_s=self._settings.start_warmup_ask_s,
                timeout_s=self._settings.start_warmup_s,
            )
        # In the registry before it says ready: admission reads the registry, and a question
        # sent the moment the worker is ready must not be refused `no_worker` (seen in CI).
        with contextlib.suppress(Exception):  # the heartbeat announces again
            await self._presence.announce(self.channel or "")
        self.ready.set()
        metrics.worker_started(self)
        logger.info(
            "worker ready on %s (own channel %s)", self._settings.request_channel, self.channel
        )
        try:
            self._run_task = asyncio.current_task()
            async with asyncio.TaskGroup() as group:
                self._pullers = [
                    group.create_task(self._pull(self._settings.request_channel)),
                    group.create_task(
                        self._pull(self._settings.background_channel, background=True)
                    ),
                ]
                group.create_task(self._pull_control(self.channel))
                group.create_task(self._presence.announce_every_heartbeat(self.channel))
                if self._faq is not None:
                    group.create_task(
                        faq_resync(
                            cache=self._faq, transport=self._transport, reply_channel=self.channel
                        )
                    )
                    if self._faq.until_ready is not None:
                        group.create_task(self._faq.until_ready())
                group.create_task(self._watch_health())
        except BaseExceptionGroup as errors:
            unhealthy, _rest = errors.split(EngineError)
            if self._failure is None or unhealthy is None:
                raise
            # the one reason the worker stops on its own; callers catch EngineError
            raise unhealthy.exceptions[0] from None
        finally:
            metrics.worker_stopped(self)
            await self._presence.leave(self.channel)
            await self._hand_back_all()
            await self._abort_all()

    async def drain(self, *, timeout_s: float) -> None:
        """Stop cleanly: take nothing more, hand back what was taken and not accepted, count
        for nothing in the registry (capacity 0: admission stops counting this worker, routing
        stops choosing it), let running requests finish for up to `timeout_s`, then stop `run`
        (aborting whatever still runs). It stays announced meanwhile: a worker that left the
        registry counts as dead, and its answers would be moved to another worker."""
        if self._draining:
            return
        self._draining = True
        with contextlib.suppress(Exception):  # else at the next heartbeat
            await self._presence.announce(self.channel or "")  # capacity 0 at once
        for puller in self._pullers:
            puller.cancel()
        await asyncio.gather(*self._pullers, return_exceptions=True)
        handed_back = await self._hand_back_all()
        running = [active.task for active in self._active.entries()]
        logger.info(
            "draining: handed back %d queued request(s), finishing %d running (up to %g s)",
            handed_back,
            len(running),
            timeout_s,
        )
        if running:
            await asyncio.wait(running, timeout=timeout_s if timeout_s > 0 else None)
        if self._run_task is not None:
            self._run_task.cancel()

    async def _hand_back_all(self) -> int:
        if self.channel is None:
            return 0
        shared = (self._settings.request_channel, self._settings.background_channel)
        return await self._intake.hand_back_all(shared, consumer=self.channel)

    async def _pull(self, queue: str, *, background: bool = False) -> None:
        """Take from this worker's own queue (affinity, warm-ups), else from the queue of
        answers moved from a dead worker, else from `queue`, whenever a slot is free (and, for
        background work, a background slot).

        No slot is held while waiting for a request: an idle chat taker must not keep
        background work out (with one slot it did). So two takers can each take one request
        for the last free slot; the second waits for a slot, taken but not accepted, and a
        freer worker reclaims it after `reclaim_after_s` if the wait is long.
        """
        while True:
            if background:
                await self._active.background_slots.acquire()
            holds_slot = False
            started = False
            try:
                await self._active.slots.acquire()  # wait for a free slot...
                self._active.slots.release()  # ...without holding it while idle
                assert self.channel is not None
                taken = await self._intake.take(
                    [worker_queue(queue, self.channel), moved_queue(queue), queue],
                    consumer=self.channel,
                )
                await self._active.slots.acquire()
                holds_slot = True
                # shielded: a stop between the accept and the start would lose the request
                started = await asyncio.shield(self._accept_and_start(taken, background=background))
            finally:
                if not started:
                    if holds_slot:
                        self._active.slots.release()
                    if background:
                        self._active.background_slots.release()

    async def _accept_and_start(self, taken: Taken, *, background: bool) -> bool:
        """Serve a taken request if it is still this worker's; True if it now runs here."""
        message = await self._intake.accept(taken)
        if isinstance(message, PrefillRequest):
            return prefill_start(
                message, engine=self._engine, active=self._active, background=background
            )
        if message is None:
            return False
        self.requests_accepted += 1
        return self._start(message, background=background)

    async def _watch_health(self) -> None:
        """Check the engine's health (`until_unhealthy`); when its failures are no blip, raise
        EngineError, stopping `run`."""
        settings = self._settings
        if settings.health_every_s <= 0:
            return
        unhealthy = await until_unhealthy(
            self._engine,
            every_s=settings.health_every_s,
            timeout_s=settings.health_timeout_s,
            allowed_failures=settings.health_failures,
        )
        self._failure, self._engine_dead = unhealthy.reason, unhealthy.engine_dead
        logger.error(
            "engine health check failed (%s): withdrawing this worker, %s its %d running "
            "request(s) and stopping; restart it to serve again",
            unhealthy.reason,
            "failing" if self._engine_dead else "handing on",
            len(self._active),
        )
        raise EngineError(f"engine health check failed: {unhealthy.reason}")

    async def _pull_control(self, channel: str) -> None:
        while True:
            raw = await receive_retrying(self._transport, channel)
            try:
                message = worker_inbound_adapter.validate_python(raw)
            except ValidationError:
                logger.warning("dropping malformed control message %r", raw.get("type"))
                continue
            if isinstance(message, CancelRequest):
                self.cancel(message.request_id)
            elif isinstance(message, FaqUpsert | FaqRemove | FaqSnapshotChunk | FaqInSync):
                if self._faq is not None:
                    self._faq.apply(message)
            elif isinstance(message, PrefillRequest):  # typing prefill comes on the queue
                logger.warning("ignoring %s on the control channel", message.type)
            else:  # a generate sent to this worker directly is served like any other
                await self._active.slots.acquire()
                if not self._start(message):
                    self._active.slots.release()

    def cancel(self, request_id: str) -> bool:
        return self._active.cancel(request_id)

    def _start(self, message: GenerateRequest, *, background: bool = False) -> bool:
        if message.request_id in self._active:
            logger.warning("duplicate request id %s ignored", message.request_id)
            return False
        assert self._answerer is not None, "requests are pulled once the worker runs"
        progress = Progress(seq=message.first_seq - 1)  # a migrated answer goes on counting
        self._active.run(
            message,
            self._answerer.serve(message, progress),
            progress=progress,
            background=background,
            name=f"generate-{message.request_id}",
        )
        return True

    def _finished(self, active: Active) -> None:
        if self._answerer is not None:
            self._answerer.in_engine.discard(active.request.request_id)
        if not self._draining and self.channel is not None:
            to = worker_queue(self._settings.background_channel, self.channel)
            self._trim_prefills.after(active.request, active.progress, to=to)

    async def _abort_all(self) -> None:
        """Stop every running request. When the engine died (`EngineDeadError`) each fails
        `engine` (the request may have killed it: moving it could kill another worker). Else
        (a shutdown: a drain's deadline, a signal; or a remote engine unhealthy for several
        checks) nothing is sent: the worker has left the registry, so the relay moves each
        answer to another worker from the text already streamed, or fails it `worker_lost`
        when there is none (a rolling restart must not cut answers longer than the drain)."""
        for entry in await self._active.abort_all():
            if not self._engine_dead:
                continue
            await self._transport.send(
                entry.request.reply_channel,
                Error(
                    request_id=entry.request.request_id,
                    seq=entry.progress.seq + 1,
                    code="engine",
                    message=f"the model stopped working ({self._failure}); please ask again",
                ),
            )
