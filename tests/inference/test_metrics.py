"""The worker's Prometheus metrics: engine load read at scrape time, served on its own port."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator

import pytest
from channels.layers import InMemoryChannelLayer
from prometheus_client import REGISTRY

from inference.__main__ import main, metrics_start
from inference.engines.base import EngineStats
from inference.engines.scripted import ScriptedEngine
from inference.metrics import MetricsPortError, WorkerCollector, serve_metrics
from inference.settings import WorkerSettings
from inference.wire.protocol import BACKGROUND_CHANNEL, REQUEST_CHANNEL
from inference.wire.transport import Transport
from inference.worker import InferenceWorker
from tests.inference.worker_events import generate, metrics_page
from tests.inference.worker_events import running as worker_running
from tests.support.embedded import embedded_queue
from tests.support.workers import worker_settings


def value(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def wait_for(name: str, expected: float) -> None:
    for _ in range(250):
        if value(name) == expected:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{name} is {value(name)}, wanted {expected}")


@pytest.fixture
async def running() -> AsyncIterator[tuple[InferenceWorker, InMemoryChannelLayer]]:
    layer = InMemoryChannelLayer()
    worker = InferenceWorker(
        engine=ScriptedEngine(), transport=Transport(layer=layer), settings=worker_settings()
    )
    async with worker_running(worker):
        yield worker, layer


async def until_done(layer: InMemoryChannelLayer, reply: str, count: int) -> None:
    done = 0
    while done < count:
        event = await asyncio.wait_for(layer.receive(reply), 10)
        done += event["type"] in ("inference.done", "inference.error")


async def test_running_and_background_requests_are_gauged_while_they_run(
    running: tuple[InferenceWorker, InMemoryChannelLayer],
) -> None:
    _worker, layer = running
    base_running = value("chat:num_requests_running")
    base_background = value("chat:background_requests_running")
    reply = await layer.new_channel()
    words = " ".join(f"w{i}" for i in range(20))
    await embedded_queue().put(
        REQUEST_CHANNEL, generate(reply, f"{words} [[slow]]", request_id="chat-1")
    )
    await embedded_queue().put(
        BACKGROUND_CHANNEL,
        generate(reply, f"{words} [[slow]]", request_id="warm-1", priority=10),
    )
    await wait_for("chat:num_requests_running", base_running + 2)
    await wait_for("chat:background_requests_running", base_background + 1)

    await until_done(layer, reply, 2)
    await wait_for("chat:num_requests_running", base_running)
    await wait_for("chat:background_requests_running", base_background)


async def test_a_stopped_worker_is_no_longer_counted() -> None:
    layer = InMemoryChannelLayer()
    worker = InferenceWorker(
        engine=ScriptedEngine(), transport=Transport(layer=layer), settings=worker_settings()
    )
    task = asyncio.create_task(worker.run())
    await worker.ready.wait()
    reply = await layer.new_channel()
    before = value("chat:num_requests_running")
    await embedded_queue().put(
        REQUEST_CHANNEL, generate(reply, "a b c d e f g h [[slow]]", request_id="x")
    )
    await wait_for("chat:num_requests_running", before + 1)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert value("chat:num_requests_running") == before


class _Measured:
    """A worker as the collector sees it, with chosen numbers."""

    def __init__(
        self,
        stats: EngineStats,
        *,
        key: int,
        queued: int = 0,
        background: int = 0,
        accepted: int = 0,
    ) -> None:
        self._stats, self.engine_key = stats, key
        self.queued_requests, self.background_requests = queued, background
        self.requests_accepted = accepted

    def engine_stats(self) -> EngineStats:
        return self._stats


def stats(**values: int) -> EngineStats:
    fields = {
        "unfinished_requests": 0,
        "running_requests": 0,
        "waiting_requests": 0,
        "prefix_cache_queries": 0,
        "prefix_cache_hits": 0,
    }
    return EngineStats(**{**fields, **values})


def collected(collector: WorkerCollector) -> dict[str, float]:
    return {s.name: s.value for family in collector.collect() for s in family.samples}


def test_engines_shared_by_workers_count_once_and_stale_counts_are_capped() -> None:
    collector = WorkerCollector()
    assert collected(collector) == {}  # no worker in this process: nothing to report
    shared = stats(
        unfinished_requests=3,
        running_requests=2,
        waiting_requests=1,
        prefix_cache_queries=1000,
        prefix_cache_hits=640,
    )
    collector.add(_Measured(shared, key=1, queued=1, accepted=2))
    collector.add(_Measured(shared, key=1, background=1, accepted=3))
    # vLLM's scheduler said 4 running, but it holds only one request now (aborted meanwhile)
    collector.add(_Measured(stats(unfinished_requests=1, running_requests=4), key=2))

    samples = collected(collector)
    assert samples["chat:engine_prefix_cache_queries_total"] == 1000
    assert samples["chat:engine_prefix_cache_hits_total"] == 640
    assert samples["chat:num_requests_running"] == 2 + 1
    assert samples["chat:num_requests_waiting"] == 1 + 1  # the engine's queue + the worker's
    assert samples["chat:background_requests_running"] == 1
    assert samples["chat:worker_requests_accepted_total"] == 5  # per worker, not per engine


async def test_a_standalone_worker_serves_its_metrics_on_its_port(
    running: tuple[InferenceWorker, InMemoryChannelLayer],
) -> None:
    text = await metrics_page()
    for name in (
        "chat:engine_prefix_cache_queries_total",
        "chat:engine_prefix_cache_hits_total",
        "chat:num_requests_running",
        "chat:num_requests_waiting",
        "chat:background_requests_running",
    ):
        assert f"\n{name} " in text, name


def test_a_taken_port_is_a_clear_error_before_the_model_loads(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(MetricsPortError, match="INFERENCE_METRICS_PORT"):
            serve_metrics(host="127.0.0.1", port=port)
        monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")  # never reached
        monkeypatch.setenv("INFERENCE_METRICS_PORT", str(port))
        started = time.monotonic()
        assert main([]) == 1
    assert time.monotonic() - started < 5
    assert f"127.0.0.1:{port}" in capsys.readouterr().err


def test_a_second_worker_on_the_default_port_runs_without_metrics_but_a_chosen_port_must_be_free(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as taken:  # the first worker on this host
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = worker_settings(metrics_port=port)
        assert metrics_start(settings, port_chosen=False) is False
        assert "Running without worker metrics" in capsys.readouterr().err
        with pytest.raises(MetricsPortError):
            metrics_start(settings, port_chosen=True)
    assert metrics_start(worker_settings(metrics_port=0), port_chosen=True) is False


@pytest.mark.parametrize(
    ("env", "port"),
    [({}, 9400), ({"INFERENCE_METRICS_PORT": "0"}, 0), ({"INFERENCE_METRICS_PORT": "9555"}, 9555)],
)
def test_port_settings(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], port: int) -> None:
    monkeypatch.delenv("INFERENCE_METRICS_PORT", raising=False)
    for key, raw in env.items():
        monkeypatch.setenv(key, raw)
    settings = WorkerSettings.from_env()
    assert (settings.metrics_port, settings.metrics_host) == (port, "127.0.0.1")


@pytest.mark.parametrize("raw", ["abc", "70000", "-1"])
def test_a_bad_port_is_refused_with_its_name(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("INFERENCE_METRICS_PORT", raw)
    with pytest.raises(ValueError, match="INFERENCE_METRICS_PORT"):
        WorkerSettings.from_env()
