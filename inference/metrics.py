"""The inference worker's Prometheus metrics: engine load and vLLM's prefix-cache counters.

Read at scrape time from every running worker of this process (a custom collector), so the
numbers are never older than the scrape. The engine's numbers come from vLLM's own stat
logger (`Engine.stats()`); the worker adds what only it knows (requests it took that have not
reached the engine yet, background requests). Embedded in the web process, these appear in
its `/metrics` (same default registry); a standalone worker serves them on
`INFERENCE_METRICS_HOST:INFERENCE_METRICS_PORT` (`serve_metrics`). No Django here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Protocol
from wsgiref.simple_server import WSGIServer

import prometheus_client
from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from inference.engines.base import EngineStats

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]


class MeasuredWorker(Protocol):
    """What the collector reads from a worker (`inference.worker.InferenceWorker`)."""

    @property
    def engine_key(self) -> int: ...  # the same for workers sharing one engine

    def engine_stats(self) -> EngineStats: ...

    @property
    def queued_requests(self) -> int: ...

    @property
    def background_requests(self) -> int: ...

    @property
    def requests_accepted(self) -> int: ...


class WorkerCollector:
    """Sums over this process's running workers; an engine shared by several counts once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers: list[MeasuredWorker] = []

    def add(self, worker: MeasuredWorker) -> None:
        with self._lock:
            self._workers.append(worker)

    def remove(self, worker: MeasuredWorker) -> None:
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)

    def describe(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        return self._families(workers=[])

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        with self._lock:
            workers = list(self._workers)
        if not workers:  # a web process whose workers run elsewhere: they report their own
            return iter(())
        return self._families(workers=workers)

    def _families(
        self, *, workers: list[MeasuredWorker]
    ) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        engines: dict[int, EngineStats] = {}
        queued = background = accepted = 0
        for worker in workers:
            if worker.engine_key not in engines:
                engines[worker.engine_key] = worker.engine_stats()
            queued += worker.queued_requests
            background += worker.background_requests
            accepted += worker.requests_accepted
        running = waiting = queries = hits = 0
        for stats in engines.values():
            # The scheduler's counts arrive with engine steps; after an abort with nothing
            # left to step they would stay stale, so never report more than vLLM still holds.
            engine_running = min(stats.running_requests, stats.unfinished_requests)
            running += engine_running
            waiting += min(stats.waiting_requests, stats.unfinished_requests - engine_running)
            queries += stats.prefix_cache_queries
            hits += stats.prefix_cache_hits
        yield _counter(
            "chat:engine_prefix_cache_queries_total",
            "Prompt tokens looked up in vLLM's prefix cache (as vLLM counts them).",
            queries,
        )
        yield _counter(
            "chat:engine_prefix_cache_hits_total",
            "Prompt tokens found in vLLM's prefix cache (hit rate = hits / queries).",
            hits,
        )
        yield _counter(
            "chat:worker_requests_accepted_total",
            "Requests the workers took from the request queue and served (each request is "
            "accepted by one worker).",
            accepted,
        )
        yield GaugeMetricFamily(
            "chat:num_requests_running", "Requests in the engine's running batch.", value=running
        )
        yield GaugeMetricFamily(
            "chat:num_requests_waiting",
            "Requests waiting: in the engine's queue, plus taken by a worker and not yet handed "
            "to the engine (FAQ lookup, prompt rendering).",
            value=waiting + queued,
        )
        yield GaugeMetricFamily(
            "chat:background_requests_running",
            "Background requests (prefix-cache warm-ups, batch) the workers are serving.",
            value=background,
        )


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, value=value)


WORKERS = WorkerCollector()
_collector: Collector = WORKERS
REGISTRY.register(_collector)


def worker_started(worker: MeasuredWorker) -> None:
    WORKERS.add(worker)


def worker_stopped(worker: MeasuredWorker) -> None:
    WORKERS.remove(worker)


class MetricsPortError(Exception):
    """The metrics port could not be opened (in use, or not allowed)."""


def serve_metrics(*, host: str, port: int) -> WSGIServer:
    """Serve this process's metrics over HTTP in a daemon thread (a standalone worker).

    Returns the server (`shutdown()` stops it)."""
    try:
        server, _thread = prometheus_client.start_http_server(port, addr=host)
    except OSError as exc:
        raise MetricsPortError(
            f"cannot serve metrics on {host}:{port} ({exc.strerror or exc}). Another worker on "
            "this host may have it: give each worker its own INFERENCE_METRICS_PORT, or set it "
            "to 0 to turn the worker's metrics off."
        ) from exc
    return server
