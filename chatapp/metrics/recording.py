"""What the instrumented code calls: one function per event, the arithmetic kept here.

Callers make one call each (the relay when an answer ends, the consumer per frame, admission
per refusal), so nothing is counted once per watching socket. Nothing here imports the code
it measures: answers are read through the `EndedAnswer` protocol.
"""

from __future__ import annotations

import weakref
from typing import Literal, Protocol

from chatapp.metrics import registry

FrameKind = Literal["text", "template", "patch"]


class EndedAnswer(Protocol):
    """The end of an answer as the relay logs it (`chatapp.answers.entries.LoggedEnd`)."""

    @property
    def status(self) -> str: ...
    @property
    def error_code(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def prompt_tokens(self) -> int | None: ...
    @property
    def completion_tokens(self) -> int | None: ...
    @property
    def cached_prompt_tokens(self) -> int | None: ...
    @property
    def queue_wait_ms(self) -> float | None: ...
    @property
    def ttft_ms(self) -> float | None: ...
    @property
    def total_ms(self) -> float | None: ...


class AnswerOwner(Protocol):
    @property
    def active_answers(self) -> int: ...


def answer_ended(end: EndedAnswer, *, faq_lookup: bool, elapsed_s: float) -> None:
    """Record one answer that ended, however it ended. `elapsed_s`: since the relay sent it."""
    source = "faq" if end.source == "faq" else "model"
    registry.ANSWERS.labels(source=source, status=end.status).inc()
    if end.status == "failed":
        registry.ERRORS.labels(code=end.error_code or "engine").inc()
    if faq_lookup:
        registry.FAQ_REQUESTS.labels(result="hit" if source == "faq" else "miss").inc()
    if end.queue_wait_ms is not None:
        registry.REQUEST_QUEUE_TIME.observe(end.queue_wait_ms / 1000.0)
    if end.ttft_ms is not None:
        registry.TIME_TO_FIRST_TOKEN.labels(source=source).observe(end.ttft_ms / 1000.0)
    itl = inter_token_latency_s(
        ttft_ms=end.ttft_ms, total_ms=end.total_ms, completion_tokens=end.completion_tokens
    )
    if itl is not None:
        registry.INTER_TOKEN_LATENCY.observe(itl)
    if end.status == "complete":
        registry.E2E_REQUEST_LATENCY.labels(source=source).observe(max(0.0, elapsed_s))
    if end.prompt_tokens:
        registry.PROMPT_TOKENS.inc(end.prompt_tokens)
    if end.cached_prompt_tokens:
        registry.CACHED_PROMPT_TOKENS.inc(end.cached_prompt_tokens)
    if end.completion_tokens:
        registry.GENERATION_TOKENS.inc(end.completion_tokens)


def inter_token_latency_s(
    *, ttft_ms: float | None, total_ms: float | None, completion_tokens: int | None
) -> float | None:
    """The answer's mean gap between tokens after the first, in seconds; None below 2 tokens."""
    if ttft_ms is None or total_ms is None or completion_tokens is None or completion_tokens < 2:
        return None
    return max(0.0, total_ms - ttft_ms) / (completion_tokens - 1) / 1000.0


def request_frame(*, kind: FrameKind, frame_bytes: int, prompt_text: str) -> None:
    """A chat.send / chat.edit frame that started an answer, and the text it stands for."""
    registry.REQUEST_FRAME_BYTES.labels(kind=kind).observe(frame_bytes)
    registry.REQUEST_FRAME_BYTES_TOTAL.inc(kind, frame_bytes)
    registry.REQUEST_PROMPT_BYTES.labels(kind=kind).inc(len(prompt_text.encode()))


def client_ttft(*, ttft_ms: float) -> None:
    """A browser-measured time to first token, accepted and stored once."""
    registry.CLIENT_TIME_TO_FIRST_TOKEN.observe(ttft_ms / 1000.0)


def error_sent(*, code: str) -> None:
    """A chat.error refusing a client frame (answer failures are counted by `answer_ended`)."""
    registry.ERRORS.labels(code=code).inc()


def admission_refused(*, reason: str) -> None:
    registry.ADMISSION_REFUSALS.labels(reason=reason).inc()


def handoff_changed(*, action: str, waiting: int) -> None:
    """Who answers a conversation changed by `action`; `waiting` customers wait now."""
    registry.HANDOFFS.labels(action=action).inc()
    registry.HANDOFFS_WAITING.set(waiting)


def handoff_first_response(*, seconds: float) -> None:
    registry.HANDOFF_FIRST_RESPONSE.observe(max(0.0, seconds))


def admission_sampled(*, in_flight: int) -> None:
    registry.ADMISSION_IN_FLIGHT.set(in_flight)


# Relays of this process (one per event loop; tests make many): the gauge sums them at scrape
# time, so it is never off by a missed decrement.
_owners: weakref.WeakSet[AnswerOwner] = weakref.WeakSet()


def answer_write_fenced() -> None:
    registry.ANSWER_WRITES_FENCED.inc()


def answer_migrated() -> None:
    registry.ANSWERS_MIGRATED.inc()


def relay_started(owner: AnswerOwner) -> None:
    _owners.add(owner)


def _active_streams() -> float:
    return float(sum(owner.active_answers for owner in list(_owners)))


registry.ACTIVE_STREAMS.set_function(_active_streams)
