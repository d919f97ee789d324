"""Answering one generate request, from `inference.accepted` to `inference.done` or an error.

The worker (inference/worker.py) decides which requests run; this module runs each one: it
renders the prompt and streams the engine's answer as coalesced deltas, with a heartbeat
alongside. When the request allows the FAQ cache, the lookup runs while the engine starts, so
a miss adds no time before the first token: the first delta waits for the lookup's verdict
(it usually came long before), and a hit closes the engine stream (vLLM aborts the request)
and streams the stored answer instead. Faults end the answer with an
error instead of silence: no new token for `stall_s` after the first (a wedged engine), an
engine that refuses or fails, or a reply channel that stays full past the transport's bound
(counted in `inference_events_dropped_total`, and an "overloaded" error tried once).
Cancelling the task that runs `serve` is the abort path (the engine stream is closed and vLLM
aborts the request); a stop from the requester ends with `done` (finish_reason "abort").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from prometheus_client import Counter

from inference.engine_request import engine_request_of
from inference.engines.base import (
    Engine,
    EngineDelta,
    PromptTooLongError,
    RequestRejectedError,
)
from inference.faq.cache import FaqCache, FaqHit, FaqNear
from inference.settings import WorkerSettings
from inference.streaming import coalesce
from inference.wire.protocol import (
    Accepted,
    Delta,
    Done,
    Error,
    ErrorCode,
    FinishReason,
    GenerateRequest,
    Heartbeat,
    TokenLogprob,
    WorkerHops,
)
from inference.wire.transport import SendResult, Transport

logger = logging.getLogger(__name__)

EVENTS_DROPPED = Counter(
    "inference_events_dropped",
    "Events of an answer the worker could not deliver, so it aborted the answer: the reply "
    "channel stayed full (channel_full) or the channel layer failed (send_failed).",
    ["reason"],
)


# Blank lines before an answer's first text: some chat templates (and models) put a newline
# after the assistant header, which the template does not count as part of the turn.
_LEADING_BLANK_LINES = re.compile(r"\A(?:[ \t\r]*\n)+")
# One space before a first word: SentencePiece tokenizers (Llama 2, Gemma) decode an answer's
# first token as " Word" after the prompt. Only a lone space: two or more are indentation.
_LONE_LEADING_SPACE = re.compile(r"\A (?=\S)")


def answer_start(text: str) -> str | None:
    """What to send of an answer's beginning, `text` being all of it the engine has made so
    far (nothing sent yet); None while it is only whitespace (hold it, more may follow).

    Blank lines and a lone space before the first word are dropped; indentation is kept, so
    an answer that begins with an indented code line or a nested list item keeps its shape.
    """
    if not text.strip():
        return None
    return _LONE_LEADING_SPACE.sub("", _LEADING_BLANK_LINES.sub("", text), count=1)


class _FaqAnsweredError(Exception):
    """The FAQ cache found the answer while the engine was starting: the engine stream is
    closed (aborted) on the way out, and the stored answer is sent instead."""

    def __init__(self, timed: _TimedHit) -> None:
        super().__init__(f"FAQ entry {timed.hit.entry_id}")
        self.timed = timed


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
class Progress:
    """How far one answer got (what its `done`, or the error ending it, reports)."""

    seq: int = 0
    completion_tokens: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    ttft_ms: float | None = None
    finish_reason: FinishReason = "stop"
    started: float = field(default_factory=time.monotonic)
    # where the time to the first delta went (`WorkerHops`), from `started`
    prompt_ms: float | None = None
    engine_first_token_ms: float | None = None
    first_delta_sent_ms: float | None = None
    # the model's answer as sent, delta by delta (what the requester stores), and whether
    # its done went out: the worker prefills the next turn's trimmed prompt from them
    answer: list[str] = field(default_factory=list)
    done_sent: bool = False

    def elapsed_ms(self) -> float:
        return (time.monotonic() - self.started) * 1000.0

    def hops(self) -> WorkerHops:
        return WorkerHops(
            prompt_ms=self.prompt_ms,
            engine_first_token_ms=self.engine_first_token_ms,
            first_delta_sent_ms=self.first_delta_sent_ms,
        )


class RequestAnswerer:
    """Runs the requests one worker took; one per worker."""

    def __init__(
        self,
        *,
        engine: Engine,
        transport: Transport,
        settings: WorkerSettings,
        faq: FaqCache | None,
        worker_channel: str,
        cancelled_by_client: Callable[[str], bool],
    ) -> None:
        self._engine = engine
        self._transport = transport
        self._settings = settings
        self._faq = faq
        self._worker_channel = worker_channel  # where requesters send inference.cancel
        self._cancelled_by_client = cancelled_by_client
        self.in_engine: set[str] = set()  # requests handed to the engine (for metrics)

    async def serve(self, request: GenerateRequest, progress: Progress) -> None:
        """Answer one request to its end: accepted, deltas (from the FAQ cache or the engine),
        then done or an error. Cancelling the task running it is the abort path."""
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

    async def _generate(self, request: GenerateRequest, progress: Progress) -> None:
        reply = request.reply_channel
        queue_wait_ms = max(0.0, (time.time() - request.submitted_at) * 1000.0)
        failure: tuple[ErrorCode, str] | None = None  # how the engine failed, if it did
        near: FaqNear | None = None
        try:
            accepted = Accepted(
                request_id=request.request_id,
                worker_channel=self._worker_channel,
                queue_wait_ms=queue_wait_ms,
            )
            await self._send(request, accepted, seq=1)
            lookup = self._start_faq_lookup(request)
            try:
                await self._stream_answer(request, progress, faq=lookup)
            except _FaqAnsweredError as answered:
                await self._send_faq_answer(
                    request, progress, answered.timed, queue_wait_ms=queue_wait_ms
                )
                return
            finally:
                if lookup is not None:
                    lookup.cancel()
            near = _near_of(lookup)
        except _UndeliverableError as exc:
            await self._undeliverable(request, exc)
            return
        except asyncio.CancelledError:
            # a stop from the requester, also while the FAQ cache is asked: end with "abort"
            if not self._cancelled_by_client(request.request_id):
                raise  # worker shutdown: the worker reports it
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
            faq_near_entry_id=None if near is None else near.entry_id,
            suggested_entries=[] if near is None else list(near.suggestions),
            hops=progress.hops(),
        )
        try:
            await self._send(request, done, seq=done.seq)
        except _UndeliverableError as exc:
            await self._undeliverable(request, exc)
            return
        progress.done_sent = True

    async def _stream_answer(
        self,
        request: GenerateRequest,
        progress: Progress,
        *,
        faq: asyncio.Task[_Verdict] | None = None,
    ) -> None:
        """Stream the engine's answer as deltas. Raises _NoProgressError when the engine stops
        producing tokens (after the first), _UndeliverableError when a delta cannot be sent,
        _FaqAnsweredError when `faq` (the lookup running alongside) finds the answer before
        the first delta is sent; each closes the engine stream on its way out, which aborts
        the engine request."""
        unsent_tokens = 0
        unsent_logprobs: tuple[TokenLogprob, ...] = ()  # of deltas that had no text to send
        held = ""  # the answer's leading whitespace, until its first text shows what it is
        try:
            engine_request = await asyncio.to_thread(
                engine_request_of,
                request,
                builder=self._engine.prompt_builder,
                defaults=self._engine.defaults,
            )
        except Exception:
            if faq is not None:  # a question the FAQ answers needs no prompt that fits
                await asyncio.wait({faq})
                _raise_if_answered(faq)
            raise
        progress.prompt_ms = progress.elapsed_ms()
        self.in_engine.add(request.request_id)
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
                        if faq is not None and not faq.done():
                            delta = await _next_delta_unless_answered(faq, stream)
                        else:
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
                # NUL: PostgreSQL's text cannot hold it, and a byte-fallback token decodes to
                # it (token 193 of the tiny model); dropped here, so what is shown is stored.
                text = delta.text.replace("\x00", "")
                if not progress.seq:  # the answer's beginning: see answer_start
                    held += text
                    text = answer_start(held) or ""
                    if text:
                        held = ""
                if not text:
                    unsent_tokens += delta.tokens
                    unsent_logprobs += delta.logprobs or ()
                    continue
                if progress.engine_first_token_ms is None:
                    progress.engine_first_token_ms = progress.elapsed_ms()
                if faq is not None:  # the first text waits for the lookup's verdict
                    await asyncio.wait({faq})
                    _raise_if_answered(faq)
                    faq = None
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
                progress.answer.append(text)
                if progress.first_delta_sent_ms is None:
                    progress.first_delta_sent_ms = progress.elapsed_ms()
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

    def _start_faq_lookup(self, request: GenerateRequest) -> asyncio.Task[_Verdict] | None:
        if request.faq_lookup is None or self._faq is None:
            return None
        return asyncio.create_task(_faq_lookup(request, self._faq))

    async def _send_faq_answer(
        self,
        request: GenerateRequest,
        progress: Progress,
        timed: _TimedHit,
        *,
        queue_wait_ms: float,
    ) -> None:
        """Stream an approved FAQ answer (the engine request was aborted)."""
        hit = timed.hit
        ttft_ms = (time.monotonic() - timed.started) * 1000.0
        progress.seq = 1
        delta = Delta(request_id=request.request_id, seq=1, text=hit.answer, tokens=0)
        await self._send(request, delta, seq=1)
        progress.first_delta_sent_ms = progress.elapsed_ms()
        done = Done(
            request_id=request.request_id,
            seq=2,
            finish_reason="stop",
            prompt_tokens=0,
            completion_tokens=0,
            cached_prompt_tokens=0,
            queue_wait_ms=queue_wait_ms,
            ttft_ms=ttft_ms,
            total_ms=(time.monotonic() - timed.started) * 1000.0,
            source="faq",
            faq_entry_id=hit.entry_id,
            faq_score=hit.score,
            hops=WorkerHops(first_delta_sent_ms=progress.first_delta_sent_ms),
        )
        await self._send(request, done, seq=2)


@dataclass(frozen=True, slots=True)
class _TimedHit:
    hit: FaqHit
    started: float  # monotonic: when the lookup began (the FAQ answer's TTFT counts from it)


# what the lookup running alongside the engine found: the answer, a near miss, or nothing
_Verdict = _TimedHit | FaqNear | None


async def _next_delta_unless_answered(
    faq: asyncio.Task[_Verdict], stream: AsyncIterator[EngineDelta]
) -> EngineDelta:
    """The engine's next delta, unless the lookup finds the answer first: a hit must not wait
    for the engine's first token (a long prefill on CPU). Then the wait for the delta is
    cancelled (the engine stream ends) and _FaqAnsweredError raised."""
    next_delta = asyncio.ensure_future(anext(stream))
    try:
        await asyncio.wait({faq, next_delta}, return_when=asyncio.FIRST_COMPLETED)
        if not next_delta.done() or next_delta.exception() is not None:
            # the verdict decides first: a hit answers even when the engine failed to start
            await asyncio.wait({faq})
            _raise_if_answered(faq)
        return await next_delta
    finally:
        if not next_delta.done():
            next_delta.cancel()
            # settled before the stream is closed: a generator still running cannot be
            await asyncio.gather(next_delta, return_exceptions=True)


def _raise_if_answered(faq: asyncio.Task[_Verdict]) -> None:
    if faq.done() and not faq.cancelled() and isinstance(timed := faq.result(), _TimedHit):
        raise _FaqAnsweredError(timed)


def _near_of(lookup: asyncio.Task[_Verdict] | None) -> FaqNear | None:
    """The entry a model-answered question came close to, if the lookup had finished."""
    if lookup is None or not lookup.done() or lookup.cancelled():
        return None
    found = lookup.result()
    return found if isinstance(found, FaqNear) else None


async def _faq_lookup(request: GenerateRequest, faq: FaqCache) -> _Verdict:
    """The FAQ cache's verdict on the request's last question (None: it failed, so the model
    answers: the cache is an optimisation and never fails an answer)."""
    assert request.faq_lookup is not None
    question = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
    started = time.monotonic()
    try:
        found = await faq.lookup(question=question, scopes=request.faq_lookup.scopes)
    except Exception:
        logger.exception("FAQ lookup failed; answering with the model")
        return None
    return _TimedHit(hit=found, started=started) if isinstance(found, FaqHit) else found
