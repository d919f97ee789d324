"""The inference worker: pulls generate requests, streams coalesced deltas to the requester.

A worker pulls from the shared request channel only while it has a free slot, so several
workers on one Redis share the load and a busy one leaves requests to idle ones. Background
work comes on its own channel and holds at most `max_background` of the slots, so it never
fills the engine; vLLM's priority scheduling puts it behind chat inside the engine too. The
worker announces its capacity (running slots plus queue) in the registry, which is how the
web tier bounds the queue and tells "busy" from "no worker". Each request
runs in its own task; cancelling that task is the abort path (the engine stream is closed and
vLLM aborts the request). Cancels arrive on the worker's own channel, which every requester
learns from the `inference.accepted` event.

Faults: a request that made no new token for `stall_s` after its first one is aborted with an
engine error (a wedged engine must not stream heartbeats forever). The engine's own health
check runs every `health_every_s`; when it fails the worker withdraws from the registry, fails
its running requests and stops (`run` raises EngineError): a dead vLLM engine does not come
back, so recovery is a restart of the worker (a fresh engine), which the process supervisor
or, embedded, the web server's exit does. A reply channel that stays full past the transport's
bound ends that answer (aborted, counted in `inference_events_dropped_total`, and an
"overloaded" error is tried once).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import Counter
from pydantic import ValidationError

from inference import metrics, retry
from inference.engine_request import engine_request_of
from inference.engines.base import (
    Engine,
    EngineError,
    EngineStats,
    PromptTooLongError,
    RequestRejectedError,
)
from inference.faq.cache import FaqCache
from inference.faq.sync import faq_resync
from inference.healthcheck import mark_alive
from inference.protocol import (
    FAQ_WORKERS_GROUP,
    Accepted,
    CancelRequest,
    Delta,
    Done,
    Error,
    ErrorCode,
    FaqInSync,
    FaqRemove,
    FaqSnapshotChunk,
    FaqUpsert,
    FinishReason,
    GenerateRequest,
    Heartbeat,
    TokenLogprob,
    worker_inbound_adapter,
)
from inference.registry import WorkerRegistry, worker_registry
from inference.settings import WorkerSettings
from inference.streaming import coalesce
from inference.transport import SendResult, Transport

logger = logging.getLogger(__name__)

EVENTS_DROPPED = Counter(
    "inference_events_dropped",
    "Events of an answer the worker could not deliver, so it aborted the answer: the reply "
    "channel stayed full (channel_full) or the channel layer failed (send_failed).",
    ["reason"],
)


class _NoProgressError(Exception):
    """The engine produced no new token for `stall_s` after the first one."""


class _UndeliverableError(Exception):
    """An event of the answer could not be delivered: the answer ends (raised, so that the
    engine stream is closed, i.e. aborted, before anything else is sent)."""

    def __init__(self, *, event: str, seq: int, result: SendResult) -> None:
        super().__init__(f"could not deliver {event} ({result.value})")
        self.seq = seq
        self.result = result


@dataclass
class _Progress:
    seq: int = 0
    completion_tokens: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    ttft_ms: float | None = None
    finish_reason: FinishReason = "stop"
    started: float = field(default_factory=time.monotonic)

    def elapsed_ms(self) -> float:
        return (time.monotonic() - self.started) * 1000.0


@dataclass
class _Active:
    request: GenerateRequest
    task: asyncio.Task[None]
    progress: _Progress
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
        self._in_engine: set[str] = set()  # requests handed to the engine (for metrics)
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
        return sum(1 for request_id in list(self._active) if request_id not in self._in_engine)

    @property
    def background_requests(self) -> int:
        return sum(1 for active in list(self._active.values()) if active.background)

    async def run(self) -> None:
        """Serve until cancelled; on cancel, abort every running request."""
        self.channel = await self._transport.new_channel()
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
        progress = _Progress()
        task = asyncio.create_task(
            self._serve(message, progress), name=f"generate-{message.request_id}"
        )
        self._active[message.request_id] = _Active(
            request=message, task=task, progress=progress, background=background
        )
        task.add_done_callback(functools.partial(self._finished, message.request_id))
        return True

    def _finished(self, request_id: str, _task: asyncio.Task[None]) -> None:
        active = self._active.pop(request_id, None)
        self._in_engine.discard(request_id)
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

    async def _serve(self, request: GenerateRequest, progress: _Progress) -> None:
        heartbeat = asyncio.create_task(self._heartbeat(request))
        try:
            await self._generate(request, progress)
        finally:
            heartbeat.cancel()

    async def _heartbeat(self, request: GenerateRequest) -> None:
        # Independent of the engine: a long prefill still proves the worker is alive. A wedged
        # engine is caught by the no-progress bound and the health check, which end the
        # request, and its heartbeats with it.
        while True:
            await asyncio.sleep(self._settings.heartbeat_s)
            await self._transport.send(
                request.reply_channel, Heartbeat(request_id=request.request_id)
            )

    async def _send(
        self, request: GenerateRequest, event: Accepted | Delta | Done, *, seq: int
    ) -> None:
        """Send an event of the answer or raise _UndeliverableError. `seq` is the place the
        event has (1 for Accepted): an error sent instead takes it."""
        result = await self._transport.send(request.reply_channel, event)
        if not result:
            raise _UndeliverableError(event=type(event).__name__, seq=seq, result=result)

    async def _undeliverable(self, request: GenerateRequest, exc: _UndeliverableError) -> None:
        """Count and log an answer ended for want of delivery; tell a slow reader, once."""
        reason = "channel_full" if exc.result is SendResult.FULL else "send_failed"
        EVENTS_DROPPED.labels(reason=reason).inc()
        logger.warning("%s of %s; aborted the answer", exc, request.request_id)
        if exc.result is not SendResult.FULL:
            return  # the layer itself failed for seconds: an error would not get through
        # A full channel is a slow reader, not a gone one: say why the answer ends, without
        # waiting again for room.
        error = Error(
            request_id=request.request_id,
            seq=exc.seq,
            code="overloaded",
            message="the answer was stopped because its events were not being read",
        )
        if not await self._transport.send(request.reply_channel, error, full_retry_s=0.0):
            EVENTS_DROPPED.labels(reason=reason).inc()

    async def _generate(self, request: GenerateRequest, progress: _Progress) -> None:
        reply = request.reply_channel
        queue_wait_ms = max(0.0, (time.time() - request.submitted_at) * 1000.0)
        assert self.channel is not None
        failure: tuple[ErrorCode, str] | None = None  # how the engine failed, if it did
        try:
            accepted = Accepted(
                request_id=request.request_id,
                worker_channel=self.channel,
                queue_wait_ms=queue_wait_ms,
            )
            await self._send(request, accepted, seq=1)
            if (
                request.faq_lookup is not None
                and self._faq is not None
                and await self._answer_from_faq(request, progress, queue_wait_ms=queue_wait_ms)
            ):
                return
            await self._stream_answer(request, progress)
        except _UndeliverableError as exc:
            await self._undeliverable(request, exc)
            return
        except asyncio.CancelledError:
            # a stop from the requester, also while the FAQ cache is asked: end with "abort"
            active = self._active.get(request.request_id)
            if active is None or not active.cancelled_by_client:
                raise  # worker shutdown: _abort_all reports it
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            progress.finish_reason = "abort"
        except _NoProgressError as exc:
            logger.warning("aborted %s: %s", request.request_id, exc)
            failure = (
                "engine",
                f"the model stopped answering ({exc}); the answer was aborted",
            )
        except RequestRejectedError as exc:
            logger.info("engine refused %s: %s", request.request_id, exc)
            code: ErrorCode = (
                "context_length" if isinstance(exc, PromptTooLongError) else "invalid_request"
            )
            failure = (code, str(exc))
        except Exception as exc:
            logger.exception("engine failed on %s", request.request_id)
            failure = ("engine", f"the model failed while answering: {type(exc).__name__}")
        if failure is not None:
            await self._transport.send(
                reply,
                Error(
                    request_id=request.request_id,
                    seq=progress.seq + 1,
                    code=failure[0],
                    message=failure[1],
                ),
            )
            return
        done = Done(
            request_id=request.request_id,
            seq=progress.seq + 1,
            finish_reason=progress.finish_reason,
            prompt_tokens=progress.prompt_tokens,
            completion_tokens=progress.completion_tokens,
            cached_prompt_tokens=progress.cached_prompt_tokens,
            queue_wait_ms=queue_wait_ms,
            ttft_ms=progress.ttft_ms,
            total_ms=progress.elapsed_ms(),
        )
        try:
            await self._send(request, done, seq=done.seq)
        except _UndeliverableError as exc:
            await self._undeliverable(request, exc)

    async def _stream_answer(self, request: GenerateRequest, progress: _Progress) -> None:
        """Stream the engine's answer as deltas. Raises _NoProgressError when the engine stops
        producing tokens (after the first), _UndeliverableError when a delta cannot be sent;
        either closes the engine stream on its way out, which aborts the engine request."""
        unsent_tokens = 0
        unsent_logprobs: tuple[TokenLogprob, ...] = ()  # of deltas that had no text to send
        engine_request = await asyncio.to_thread(
            engine_request_of,
            request,
            builder=self._engine.prompt_builder,
            defaults=self._engine.defaults,
        )
        self._in_engine.add(request.request_id)
        stream = coalesce(
            self._engine.stream(engine_request),
            interval_s=self._settings.coalesce_ms / 1000.0,
            max_tokens=self._settings.coalesce_tokens,
        )
        stall_s = self._settings.stall_s
        loop = asyncio.get_running_loop()
        last_token_at: float | None = None
        # aclosing: leaving the loop early closes the engine stream now, which aborts
        async with contextlib.aclosing(stream):
            while True:
                # Bounded only after the first token: on CPU a long prefill comes before it.
                when = None if last_token_at is None or stall_s <= 0 else last_token_at + stall_s
                try:
                    async with asyncio.timeout_at(when) as no_progress:
                        delta = await anext(stream)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    if no_progress.expired():  # not a TimeoutError of the engine's own
                        raise _NoProgressError(f"no new token for {stall_s:g} s") from None
                    raise
                if delta.tokens:
                    last_token_at = loop.time()
                progress.completion_tokens += delta.tokens
                progress.prompt_tokens = delta.prompt_tokens
                progress.cached_prompt_tokens = delta.cached_prompt_tokens
                if delta.finish_reason is not None:
                    progress.finish_reason = delta.finish_reason
                # A few-shot layout ends with the assistant prefix ("Agent:"), so its
                # answers start with a space that is not part of the answer.
                text = delta.text if progress.seq else delta.text.lstrip()
                if not text:
                    unsent_tokens += delta.tokens
                    unsent_logprobs += delta.logprobs or ()
                    continue
                if progress.ttft_ms is None:
                    progress.ttft_ms = progress.elapsed_ms()
                progress.seq += 1
                tokens, unsent_tokens = delta.tokens + unsent_tokens, 0
                logprobs = None
                if delta.logprobs is not None:
                    logprobs = [*unsent_logprobs, *delta.logprobs]
                    unsent_logprobs = ()
                event = Delta(
                    request_id=request.request_id,
                    seq=progress.seq,
                    text=text,
                    tokens=tokens,
                    logprobs=logprobs,
                )
                await self._send(request, event, seq=progress.seq)
            if unsent_logprobs:  # asked-for logprobs of final tokens without text (EOS)
                progress.seq += 1
                event = Delta(
                    request_id=request.request_id,
                    seq=progress.seq,
                    text="",
                    tokens=unsent_tokens,
                    logprobs=list(unsent_logprobs),
                )
                await self._send(request, event, seq=progress.seq)

    async def _answer_from_faq(
        self, request: GenerateRequest, progress: _Progress, *, queue_wait_ms: float
    ) -> bool:
        """Stream an approved FAQ answer instead of generating; False when nothing matches."""
        assert self._faq is not None
        assert request.faq_lookup is not None
        question = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        started = time.monotonic()
        try:
            hit = await self._faq.lookup(question=question, scopes=request.faq_lookup.scopes)
        except Exception:  # the cache is an optimisation: never fail the answer for it
            logger.exception("FAQ lookup failed; answering with the model")
            return False
        if hit is None:
            return False
        ttft_ms = (time.monotonic() - started) * 1000.0
        progress.seq = 1
        delta = Delta(request_id=request.request_id, seq=1, text=hit.answer, tokens=0)
        await self._send(request, delta, seq=1)
        done = Done(
            request_id=request.request_id,
            seq=2,
            finish_reason="stop",
            prompt_tokens=0,
            completion_tokens=0,
            cached_prompt_tokens=0,
            queue_wait_ms=queue_wait_ms,
            ttft_ms=ttft_ms,
            total_ms=(time.monotonic() - started) * 1000.0,
            source="faq",
            faq_entry_id=hit.entry_id,
            faq_score=hit.score,
        )
        await self._send(request, done, seq=2)
        return True

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
