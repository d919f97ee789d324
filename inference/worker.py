"""The inference worker: pulls generate requests, streams coalesced deltas to the requester.

A worker pulls from the shared request channel only while it has a free slot, so several
workers on one Redis share the load and a busy one leaves requests to idle ones. Background
work comes on its own channel and holds at most `max_background` of the slots, so it never
fills the engine; vLLM's priority scheduling puts it behind chat inside the engine too. The
worker announces its capacity (running slots plus queue) in the registry, which is how the
web tier bounds the queue and tells "busy" from "no worker". Each request runs in its own
task (`inference/answering.py` answers it); cancelling that task is the abort path. Cancels
arrive on the worker's own channel, which every requester learns from `inference.accepted`.

The engine's own health check runs every `health_every_s`; when it fails the worker withdraws
from the registry, fails its running requests and stops (`run` raises EngineError): a dead vLLM
engine does not come back, so recovery is a restart of the worker (a fresh engine), which the
process supervisor or, embedded, the web server's exit does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from inference import metrics, retry
from inference.answering import Progress, RequestAnswerer
from inference.engines.base import (
    Engine,
    EngineError,
    EngineStats,
)
from inference.faq.cache import FaqCache
from inference.faq.sync import faq_resync
from inference.healthcheck import mark_alive
from inference.protocol import (
    FAQ_WORKERS_GROUP,
    CancelRequest,
    Error,
    FaqInSync,
    FaqRemove,
    FaqSnapshotChunk,
    FaqUpsert,
    GenerateRequest,
    worker_inbound_adapter,
)
from inference.registry import WorkerRegistry, worker_registry
from inference.settings import WorkerSettings
from inference.transport import Transport

logger = logging.getLogger(__name__)


@dataclass
class _Active:
    request: GenerateRequest
    task: asyncio.Task[None]
    progress: Progress
    background: bool = False
    cancelled_by_client: bool = False


class InferenceWorker:
    def __init__(
        self,
        *,
        engine: Engine,
        transport: Transport,
        settings: WorkerSettings,
        faq: FaqCache | None = None,
        registry: WorkerRegistry | None = None,
    ) -> None:
        self._engine = engine
        self._faq = faq
        self._transport = transport
        self._settings = settings
        # Redis when the worker runs on its own, the process-wide one when embedded
        self._registry = registry or worker_registry(redis_url=settings.redis_url)
        self._slots = asyncio.Semaphore(settings.max_active)
        self._background_slots = asyncio.Semaphore(
            max(1, min(settings.max_background, settings.max_active))
        )
        self._active: dict[str, _Active] = {}
        self._answerer: RequestAnswerer | None = None  # once the worker has its channel
        self.channel: str | None = None
        self.ready = asyncio.Event()
        self._failure: str | None = None  # why the engine's health check failed

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
        return sum(1 for request_id in list(self._active) if request_id not in in_engine)

    @property
    def background_requests(self) -> int:
        return sum(1 for active in list(self._active.values()) if active.background)

    async def run(self) -> None:
        """Serve until cancelled; on cancel, abort every running request."""
        self.channel = await self._transport.new_channel()
        self._answerer = RequestAnswerer(
            engine=self._engine,
            transport=self._transport,
            settings=self._settings,
            faq=self._faq,
            worker_channel=self.channel,
            cancelled_by_client=self._cancelled_by_client,
        )
        if self._faq is not None:
            # FAQ changes are broadcast to every worker; the full set comes from the web side
            # (faq_resync, at once and then periodically: broadcasts can be lost).
            await self._transport.group_add(FAQ_WORKERS_GROUP, self.channel)
        self.ready.set()
        metrics.worker_started(self)
        logger.info(
            "worker ready on %s (own channel %s)", self._settings.request_channel, self.channel
        )
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._pull_requests())
                group.create_task(self._pull_background())
                group.create_task(self._pull_control(self.channel))
                group.create_task(self._announce())
                if self._faq is not None:
                    group.create_task(
                        faq_resync(
                            cache=self._faq, transport=self._transport, reply_channel=self.channel
                        )
                    )
                group.create_task(self._watch_health())
        except BaseExceptionGroup as errors:
            unhealthy, _rest = errors.split(EngineError)
            if self._failure is None or unhealthy is None:
                raise
            # the one reason the worker stops on its own; callers catch EngineError
            raise unhealthy.exceptions[0] from None
        finally:
            metrics.worker_stopped(self)
            with contextlib.suppress(Exception):
                await self._registry.withdraw(worker_id=self.channel)
                if self._faq is not None:
                    await self._transport.group_discard(FAQ_WORKERS_GROUP, self.channel)
            await self._abort_all()

    async def _pull_requests(self) -> None:
        while True:
            await self._slots.acquire()
            try:
                raw = await self._receive(self._settings.request_channel)
            except BaseException:
                self._slots.release()
                raise
            if not self._start(raw):
                self._slots.release()

    async def _pull_background(self) -> None:
        while True:
            await self._background_slots.acquire()
            try:
                raw = await self._receive(self._settings.background_channel)
                await self._slots.acquire()
            except BaseException:
                self._background_slots.release()
                raise
            if not self._start(raw, background=True):
                self._slots.release()
                self._background_slots.release()

    async def _receive(self, channel: str) -> dict[str, object]:
        """Receive, riding out a Redis restart (requests sent meanwhile wait in Redis)."""
        backoff = retry.RECEIVE.start()
        while True:
            try:
                return await self._transport.receive(channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("receive on %s failed (%s); retrying", channel, exc)
                await backoff.sleep()

    async def _announce(self) -> None:
        """Tell the registry this worker is alive and how much it takes, every heartbeat."""
        assert self.channel is not None
        capacity = self._settings.max_active + self._settings.max_queue
        while True:
            try:
                await self._registry.announce(
                    worker_id=self.channel,
                    capacity=capacity,
                    ttl_s=max(3.0, 3 * self._settings.heartbeat_s),
                )
                if self._faq is not None:  # groups expire, and vanish with a Redis restart
                    await self._transport.group_add(FAQ_WORKERS_GROUP, self.channel)
                if self._settings.health_file:
                    mark_alive(Path(self._settings.health_file))
            except Exception as exc:
                logger.warning("announcing the worker failed (%s); retrying", exc)
            await asyncio.sleep(self._settings.heartbeat_s)

    async def _watch_health(self) -> None:
        """Ask the engine whether it is healthy; on failure raise EngineError, stopping `run`."""
        every, timeout = self._settings.health_every_s, self._settings.health_timeout_s
        if every <= 0:
            return
        while True:
            await asyncio.sleep(every)
            try:
                await asyncio.wait_for(
                    self._engine.check_health(), timeout if timeout > 0 else None
                )
            except TimeoutError:
                reason = f"no answer within {timeout:g} s"
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
            else:
                continue
            self._failure = reason
            logger.error(
                "engine health check failed (%s): withdrawing this worker, failing its %d "
                "running request(s) and stopping; restart it to serve again",
                reason,
                len(self._active),
            )
            raise EngineError(f"engine health check failed: {reason}")

    async def _pull_control(self, channel: str) -> None:
        while True:
            raw = await self._receive(channel)
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
            else:  # a generate sent to this worker directly is served like any other
                await self._slots.acquire()
                if not self._start(raw):
                    self._slots.release()

    def cancel(self, request_id: str) -> bool:
        active = self._active.get(request_id)
        if active is None:
            return False
        active.cancelled_by_client = True
        active.task.cancel()
        return True

    def _cancelled_by_client(self, request_id: str) -> bool:
        active = self._active.get(request_id)
        return active is not None and active.cancelled_by_client

    def _start(self, raw: dict[str, object], *, background: bool = False) -> bool:
        try:
            message = worker_inbound_adapter.validate_python(raw)
        except ValidationError as exc:
            self._reject_malformed(raw, exc)
            return False
        if isinstance(message, CancelRequest):
            self.cancel(message.request_id)
            return False
        if not isinstance(message, GenerateRequest):
            logger.warning("ignoring %s on the request channel", message.type)
            return False
        if message.request_id in self._active:
            logger.warning("duplicate request id %s ignored", message.request_id)
            return False
        assert self._answerer is not None, "requests are pulled once the worker runs"
        progress = Progress()
        task = asyncio.create_task(
            self._answerer.serve(message, progress), name=f"generate-{message.request_id}"
        )
        self._active[message.request_id] = _Active(
            request=message, task=task, progress=progress, background=background
        )
        task.add_done_callback(functools.partial(self._finished, message.request_id))
        return True

    def _finished(self, request_id: str, _task: asyncio.Task[None]) -> None:
        active = self._active.pop(request_id, None)
        if self._answerer is not None:
            self._answerer.in_engine.discard(request_id)
        self._slots.release()
        if active is not None and active.background:
            self._background_slots.release()

    def _reject_malformed(self, raw: dict[str, object], exc: ValidationError) -> None:
        reply, request_id = raw.get("reply_channel"), raw.get("request_id")
        logger.warning("malformed generate request: %s", exc.errors()[:3])
        if isinstance(reply, str) and isinstance(request_id, str) and request_id:
            error = Error(
                request_id=request_id,
                seq=1,
                code="invalid_request",
                message=f"malformed request: {exc.error_count()} invalid field(s)",
            )
            asyncio.create_task(self._transport.send(reply, error))  # noqa: RUF006

    async def _abort_all(self) -> None:
        active = list(self._active.values())
        for entry in active:
            entry.task.cancel()
        for entry in active:
            try:
                await entry.task
            except asyncio.CancelledError:
                pass
            except Exception:
                logger.exception("request task failed during shutdown")
            # after a failed health check it is the model's fault, not a lost worker
            failed = self._failure is not None
            await self._transport.send(
                entry.request.reply_channel,
                Error(
                    request_id=entry.request.request_id,
                    seq=entry.progress.seq + 1,
                    code="engine" if failed else "internal",
                    message=f"the model stopped working ({self._failure}); please ask again"
                    if failed
                    else "the inference worker shut down while answering",
                ),
            )
