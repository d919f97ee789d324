"""The worker when things go wrong: a wedged engine, a failing health check, a stop during the
FAQ lookup, a reply channel that is full. Real worker, scripted engine, in-memory layer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, cast

import pytest
from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer
from prometheus_client import REGISTRY

from inference.engines.base import EngineDeadError, EngineError
from inference.engines.scripted import ScriptedEngine
from inference.faq.cache import FaqCache, FaqHit, FaqLookupResult, FaqNear
from inference.faq.deciders import ExactRepeatDecision
from inference.faq.embedder import Embedder
from inference.settings import WorkerSettings
from inference.wire.protocol import (
    REQUEST_CHANNEL,
    CancelRequest,
    FaqLookup,
    worker_event_adapter,
)
from inference.wire.registry import RedisWorkerRegistry
from inference.wire.transport import Transport
from inference.worker import InferenceWorker
from tests.inference.worker_events import accepted_on, ask, collect, generate
from tests.support.embedded import embedded_queue, fresh_registry
from tests.support.workers import worker_settings


async def drain(layer: Any, channel: str, quiet_s: float) -> list[Any]:
    """Whatever arrives on `channel` until it stays quiet for `quiet_s`."""
    events: list[Any] = []
    while True:
        try:
            raw = await asyncio.wait_for(layer.receive(channel), quiet_s)
        except TimeoutError:
            return events
        events.append(worker_event_adapter.validate_python(raw))


async def until(predicate: Callable[[], bool], timeout_s: float = 3.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


class _Started:
    def __init__(
        self, worker: InferenceWorker, task: asyncio.Task[None], registry: RedisWorkerRegistry
    ) -> None:
        self.worker, self.task, self.registry = worker, task, registry


class Workers:
    """Starts workers on the test's layer and engine; the fixture stops them after the test."""

    def __init__(self, *, layer: Any, engine: ScriptedEngine) -> None:
        self._layer, self._engine = layer, engine
        self._tasks: list[asyncio.Task[None]] = []

    async def start(
        self,
        settings: WorkerSettings,
        *,
        faq: FaqCache | None = None,
        transport: Transport | None = None,
    ) -> _Started:
        registry = fresh_registry()
        worker = InferenceWorker(
            engine=self._engine,
            transport=transport or Transport(layer=self._layer),
            settings=settings,
            faq=faq,
            registry=registry,
        )
        task = asyncio.create_task(worker.run())
        self._tasks.append(task)
        await worker.ready.wait()
        return _Started(worker, task, registry)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


@pytest.fixture
async def workers(layer: InMemoryChannelLayer, engine: ScriptedEngine) -> AsyncIterator[Workers]:
    made = Workers(layer=layer, engine=engine)
    yield made
    await made.stop()


GLOBAL_FAQ = FaqLookup(scopes=["global"])


# ---- 1a: no progress after the first token ------------------------------------------------


async def test_an_engine_that_stops_producing_tokens_is_aborted_with_an_engine_error(
    layer: InMemoryChannelLayer, engine: ScriptedEngine, workers: Workers
) -> None:
    engine.hang_after_tokens = 2
    started = await workers.start(
        worker_settings(stall_s=0.4, heartbeat_s=0.05, coalesce_ms=0.0),
    )
    began = time.monotonic()
    reply = await ask(layer, "one two three four")
    events = await collect(layer, reply)

    assert [e.type for e in events if e.type == "inference.delta"]  # it did start streaming
    error = events[-1]
    assert error.type == "inference.error"
    assert error.code == "engine"
    assert "no new token" in error.message
    assert 0.4 <= time.monotonic() - began < 2.0
    assert engine.stats().running_requests == 0  # the engine request was aborted
    assert started.worker.active_requests == 0
    # heartbeats for it stop with the abort
    assert await drain(layer, reply, quiet_s=0.3) == []


async def test_a_long_prefill_before_the_first_token_is_not_a_stall(
    layer: InMemoryChannelLayer, engine: ScriptedEngine, workers: Workers
) -> None:
    await workers.start(worker_settings(stall_s=0.3, heartbeat_s=0.05))
    reply = await ask(layer, "[[stall]] a b")  # 1 s before a token
    events = await collect(layer, reply)
    assert events[-1].type == "inference.done"
    assert events[-1].finish_reason == "stop"
    assert any(e.type == "inference.heartbeat" for e in events)


# ---- 1b: the engine's health check --------------------------------------------------------


async def test_a_dead_engine_withdraws_the_worker_at_once_and_fails_its_requests(
    layer: InMemoryChannelLayer,
    engine: ScriptedEngine,
    workers: Workers,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """vLLM's engine core died: it cannot come back, and the request may be what killed it,
    so its answers fail `engine` instead of moving to (and killing) another worker."""
    started = await workers.start(
        worker_settings(max_active=2, max_queue=3, health_every_s=0.05, health_timeout_s=0.1),
    )
    await asyncio.sleep(0.1)
    assert await started.registry.capacity() == 5  # healthy: announced, checks pass

    reply = await ask(layer, "[[slow]] " + "w " * 200)
    await accepted_on(layer, reply)
    engine.health_error = EngineDeadError("engine core died")

    events = await collect(layer, reply)
    assert events[-1].type == "inference.error"
    assert events[-1].code == "engine"
    assert await started.registry.capacity() == 0  # withdrawn: admission stops counting it
    with pytest.raises(EngineError, match="health check"):
        await asyncio.wait_for(started.task, 2)
    assert engine.stats().running_requests == 0
    assert "health check failed" in caplog.text
    # and it takes no new request: this one stays in the channel for a healthy worker
    await embedded_queue().put(REQUEST_CHANNEL, generate(reply, "anyone?", request_id="r2"))
    await asyncio.sleep(0.1)
    left = (
        await asyncio.wait_for(embedded_queue().take(REQUEST_CHANNEL, consumer="test"), 1)
    ).message
    assert left["request_id"] == "r2"


async def test_a_remote_engine_failing_its_health_check_briefly_costs_nothing(
    layer: InMemoryChannelLayer, engine: ScriptedEngine, workers: Workers
) -> None:
    """`INFERENCE_ENGINE=openai`: a router restart makes `/health` fail once or twice; the
    worker keeps serving and the answer streaming through it completes."""
    started = await workers.start(
        worker_settings(health_every_s=0.05, health_timeout_s=0.1, health_failures=3),
    )
    reply = await ask(layer, "[[slow]] " + "w " * 30)
    await accepted_on(layer, reply)
    engine.health_error = EngineError("http://router/health answered 502")
    await asyncio.sleep(0.08)  # one or two failed checks
    engine.health_error = None

    events = await collect(layer, reply)
    assert events[-1].type == "inference.done"
    assert events[-1].finish_reason == "stop"
    assert not started.task.done()
    assert await started.registry.capacity() > 0


@pytest.mark.parametrize("failure", ["raises", "hangs"])
async def test_a_remote_engine_that_stays_unhealthy_stops_the_worker_and_hands_answers_on(
    layer: InMemoryChannelLayer,
    engine: ScriptedEngine,
    workers: Workers,
    failure: str,
) -> None:
    """`/health` fails `health_failures` times in a row: the worker withdraws and stops, and
    sends nothing for its running answers, so each relay moves its answer to another worker
    from the text already streamed (the request is not at fault, unlike a dead engine core)."""
    started = await workers.start(
        worker_settings(health_every_s=0.05, health_timeout_s=0.1, health_failures=3),
    )
    reply = await ask(layer, "[[slow]] " + "w " * 200)
    await accepted_on(layer, reply)
    if failure == "raises":
        engine.health_error = EngineError("http://router/health: connection refused")
    else:
        engine.health_hangs = True

    with pytest.raises(EngineError, match="health check"):
        await asyncio.wait_for(started.task, 3)
    events = await drain(layer, reply, quiet_s=0.2)
    assert {e.type for e in events} <= {"inference.delta", "inference.heartbeat"}
    assert await started.registry.capacity() == 0
    assert engine.stats().running_requests == 0


# ---- 2: a stop while the FAQ cache is being asked -----------------------------------------


class _SlowFaq(FaqCache):
    """A FAQ cache whose lookup takes until it is cancelled."""

    def __init__(self) -> None:
        super().__init__(embedder=cast(Embedder, object()), decider=ExactRepeatDecision())
        self.looking = asyncio.Event()

    async def lookup(self, *, question: str, scopes: Sequence[str]) -> FaqHit | None:
        self.looking.set()
        await asyncio.Event().wait()
        return None


async def test_a_stop_during_the_faq_lookup_ends_with_done_abort(
    layer: InMemoryChannelLayer, engine: ScriptedEngine, workers: Workers
) -> None:
    faq = _SlowFaq()
    started = await workers.start(worker_settings(), faq=faq)
    reply = await ask(layer, "how do I reset my password?", faq_lookup=GLOBAL_FAQ)
    accepted = await accepted_on(layer, reply)
    await asyncio.wait_for(faq.looking.wait(), 2)
    await layer.send(accepted.worker_channel, CancelRequest(request_id="r1").to_channel())

    events = await collect(layer, reply)
    done = events[-1]
    assert done.type == "inference.done"
    assert done.finish_reason == "abort"
    assert done.seq == 1
    assert done.completion_tokens == 0
    # the engine starts alongside the lookup; whatever it began is aborted
    assert engine.stats().running_requests == 0
    assert started.worker.active_requests == 0


class _TimedFaq(FaqCache):
    """A FAQ cache whose lookup takes `delay_s` and then hits, misses, or comes close."""

    def __init__(self, *, delay_s: float, hit: bool, near: bool = False) -> None:
        super().__init__(embedder=cast(Embedder, object()), decider=ExactRepeatDecision())
        self.delay_s, self.hit, self.near = delay_s, hit, near

    async def lookup(self, *, question: str, scopes: Sequence[str]) -> FaqLookupResult:
        await asyncio.sleep(self.delay_s)
        if self.hit:
            return FaqHit(entry_id=7, answer="Use the reset link.", score=0.9)
        return FaqNear(entry_id=7, score=0.6) if self.near else None


async def test_a_faq_miss_adds_no_time_before_the_models_first_token(
    layer: InMemoryChannelLayer, engine: ScriptedEngine, workers: Workers
) -> None:
    # the scripted engine's "[[stall]]" takes 1 s before its first token (a long prefill);
    # a lookup of 0.8 s must run during it, not before it (that would be 1.8 s)
    faq = _TimedFaq(delay_s=0.8, hit=False)
    await workers.start(worker_settings(), faq=faq)
    reply = await ask(layer, "[[stall]] reset password", faq_lookup=GLOBAL_FAQ)
    events = await collect(layer, reply)
    done = events[-1]
    assert done.type == "inference.done"
    assert done.source == "model"
    text = "".join(e.text for e in events if e.type == "inference.delta")
    assert text == "You said: [[stall]] reset password"
    assert done.ttft_ms is not None
    assert done.ttft_ms < 1500, done.ttft_ms
    assert done.faq_near_entry_id is None


async def test_a_model_answer_to_a_question_close_to_an_entry_names_the_entry(
    layer: InMemoryChannelLayer, engine: ScriptedEngine, workers: Workers
) -> None:
    faq = _TimedFaq(delay_s=0.05, hit=False, near=True)
    await workers.start(worker_settings(), faq=faq)
    reply = await ask(layer, "where do I set a new password", faq_lookup=GLOBAL_FAQ)
    done = (await collect(layer, reply))[-1]
    assert done.type == "inference.done"
    assert (done.source, done.faq_entry_id, done.faq_near_entry_id) == ("model", None, 7)


async def test_a_faq_hit_during_the_engine_start_aborts_it_and_answers_at_once(
    layer: InMemoryChannelLayer, engine: ScriptedEngine, workers: Workers
) -> None:
    faq = _TimedFaq(delay_s=0.2, hit=True)
    started = await workers.start(worker_settings(), faq=faq)
    sent = time.monotonic()
    reply = await ask(layer, "[[stall]] reset password", faq_lookup=GLOBAL_FAQ)
    events = await collect(layer, reply)
    done = events[-1]
    assert done.type == "inference.done"
    assert (done.source, done.faq_entry_id) == ("faq", 7)
    assert [e.text for e in events if e.type == "inference.delta"] == ["Use the reset link."]
    assert time.monotonic() - sent < 0.9  # did not wait for the engine's first token (1 s)
    assert len(engine.requests) == 1  # the engine had started ...
    assert engine.stats().running_requests == 0  # ... and was aborted
    assert started.worker.active_requests == 0


async def test_a_faq_hit_still_answers_when_the_engine_fails_to_start(
    layer: InMemoryChannelLayer, engine: ScriptedEngine, workers: Workers
) -> None:
    engine.max_prompt_tokens = 3  # every prompt is too long for the engine's "context"
    faq = _TimedFaq(delay_s=0.1, hit=True)
    await workers.start(worker_settings(), faq=faq)
    reply = await ask(layer, "reset my password please", faq_lookup=GLOBAL_FAQ)
    events = await collect(layer, reply)
    assert events[-1].type == "inference.done"
    assert events[-1].source == "faq"


# ---- 3: a full reply channel --------------------------------------------------------------


class _FullFor:
    """An in-memory layer whose sends of some event types raise ChannelFull (a slow reader)."""

    def __init__(self, inner: InMemoryChannelLayer, *, times: int, types: set[str]) -> None:
        self._inner, self._left, self._types = inner, times, types
        self.refused = 0

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        if message.get("type") in self._types and self._left > 0:
            self._left -= 1
            self.refused += 1
            raise ChannelFull(channel)
        await self._inner.send(channel, message)

    async def receive(self, channel: str) -> dict[str, Any]:
        message: dict[str, Any] = await self._inner.receive(channel)
        return message

    async def new_channel(self, prefix: str = "specific.") -> str:
        return str(await self._inner.new_channel(prefix))

    async def group_add(self, group: str, channel: str) -> None:
        await self._inner.group_add(group, channel)

    async def group_discard(self, group: str, channel: str) -> None:
        await self._inner.group_discard(group, channel)


def _dropped(reason: str) -> float:
    return REGISTRY.get_sample_value("inference_events_dropped_total", {"reason": reason}) or 0.0


async def test_a_briefly_full_reply_channel_loses_nothing(
    layer: InMemoryChannelLayer, engine: ScriptedEngine, workers: Workers
) -> None:
    full = _FullFor(layer, times=3, types={"inference.delta"})
    await workers.start(
        worker_settings(),
        transport=Transport(layer=full, full_retry_s=2.0),
    )
    reply = await ask(layer, "one two three")
    events = await collect(layer, reply)
    assert full.refused == 3
    assert events[-1].type == "inference.done"
    text = "".join(e.text for e in events if e.type == "inference.delta")
    assert text == "You said: one two three"


async def test_a_reply_channel_full_for_too_long_aborts_counts_and_says_overloaded(
    layer: InMemoryChannelLayer,
    engine: ScriptedEngine,
    workers: Workers,
    caplog: pytest.LogCaptureFixture,
) -> None:
    full = _FullFor(layer, times=10**6, types={"inference.delta"})
    started = await workers.start(
        worker_settings(),
        transport=Transport(layer=full, full_retry_s=0.3),
    )
    before = _dropped("channel_full")
    reply = await ask(layer, "[[slow]] " + "w " * 100)
    began = time.monotonic()
    events = await collect(layer, reply)
    assert 0.3 <= time.monotonic() - began < 2.0  # retried for the bound, then gave up
    error = events[-1]
    assert error.type == "inference.error"
    assert error.code == "overloaded"
    assert error.seq == 1  # the dropped delta's place: the receiver got nothing after accepted
    assert _dropped("channel_full") == before + 1
    assert engine.stats().running_requests == 0  # the engine request was aborted
    assert started.worker.active_requests == 0
    assert "full" in caplog.text


async def test_a_reply_channel_that_stays_full_gets_no_error_but_is_still_aborted(
    engine: ScriptedEngine, workers: Workers
) -> None:
    tiny = InMemoryChannelLayer(capacity=2)
    started = await workers.start(
        worker_settings(heartbeat_s=10.0),
        transport=Transport(layer=tiny, full_retry_s=0.2),
    )
    before = _dropped("channel_full")
    reply = await ask(tiny, "[[slow]] " + "w " * 100)
    await until(lambda: _dropped("channel_full") >= before + 1)
    await until(lambda: started.worker.active_requests == 0)
    assert engine.stats().running_requests == 0
    # what did get in: accepted and the first delta, then nothing (no room for an error)
    events = await drain(tiny, reply, quiet_s=0.2)
    assert [e.type for e in events] == ["inference.accepted", "inference.delta"]


def test_the_fault_bounds_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = WorkerSettings.from_env()
    assert (defaults.stall_s, defaults.health_every_s, defaults.health_timeout_s) == (30, 10, 5)
    assert defaults.health_failures == 3
    monkeypatch.setenv("INFERENCE_HEALTH_FAILURES", "1")
    monkeypatch.setenv("INFERENCE_STALL_S", "0")
    monkeypatch.setenv("INFERENCE_HEALTH_EVERY_S", "2.5")
    monkeypatch.setenv("INFERENCE_HEALTH_TIMEOUT_S", "1")
    settings = WorkerSettings.from_env()
    assert (settings.stall_s, settings.health_every_s, settings.health_timeout_s) == (0, 2.5, 1)
    assert settings.health_failures == 1
    monkeypatch.setenv("INFERENCE_HEALTH_FAILURES", "0")
    with pytest.raises(ValueError, match="INFERENCE_HEALTH_FAILURES must be at least 1"):
        WorkerSettings.from_env()


async def test_a_moved_answer_is_served_before_the_questions_waiting_in_the_queue(
    layer: InMemoryChannelLayer, engine: ScriptedEngine, workers: Workers
) -> None:
    """Issue 31 defect 8: an answer whose worker died went on at the back of the queue, behind
    every question that came after it (and could end `busy` there). It waits on the moved
    queue now, which every worker takes from before the shared one."""
    from inference.wire.request_queue import moved_queue

    await workers.start(worker_settings(max_active=1))
    queue = embedded_queue()
    reply = await layer.new_channel()
    await queue.put(REQUEST_CHANNEL, generate(reply, "[[slow]] " + "w " * 10, request_id="busy"))
    await until(lambda: engine.stats().running_requests == 1)
    for n in (1, 2):
        await queue.put(REQUEST_CHANNEL, generate(reply, f"question {n}", request_id=f"q{n}"))
    await queue.put(moved_queue(REQUEST_CHANNEL), generate(reply, "moved on", request_id="m~1"))

    served: list[str] = []
    while len(served) < 4:
        event = worker_event_adapter.validate_python(
            await asyncio.wait_for(layer.receive(reply), 5)
        )
        if event.type == "inference.accepted":
            served.append(event.request_id)
    assert served == ["busy", "m~1", "q1", "q2"]
