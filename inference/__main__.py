"""`python -m inference`: a standalone inference worker on the Redis channel layer."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys

from inference.engines.base import EngineError
from inference.metrics import MetricsPortError, serve_metrics
from inference.models import ModelNotReadyError
from inference.runtime import build_engine, build_faq_cache, start_worker
from inference.settings import WorkerSettings
from inference.wire.transport import redis_channel_layer


async def _serve(settings: WorkerSettings) -> None:
    engine = build_engine(worker_settings=settings)
    try:
        worker, task = start_worker(
            faq=build_faq_cache(settings=settings),
            engine=engine,
            layer=redis_channel_layer(redis_url=settings.redis_url),
            settings=settings,
        )
        loop = asyncio.get_running_loop()
        draining: list[asyncio.Task[None]] = []

        def stop() -> None:
            # The first signal drains (finish what runs, hand back what waits); a second one
            # stops at once.
            if draining:
                task.cancel()
                return
            print(
                f"Stopping: finishing running answers (up to {settings.drain_s:g} s; "
                "signal again to stop now).",
                flush=True,
            )
            draining.append(loop.create_task(worker.drain(timeout_s=settings.drain_s)))

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop)
        await worker.ready.wait()
        print(
            f"Inference worker ready: consuming {settings.request_channel!r} "
            f"(up to {settings.max_active} at once).",
            flush=True,
        )
        with contextlib.suppress(asyncio.CancelledError):
            await task
    finally:
        engine.shutdown()


def metrics_start(settings: WorkerSettings, *, port_chosen: bool) -> bool:
    """Serve the worker's metrics; True if they are served.

    A port the operator chose must be free (MetricsPortError). The default one may be taken by
    another worker on the same host (`make worker` twice): that one runs without metrics.
    """
    if not settings.metrics_port:
        return False
    try:
        serve_metrics(host=settings.metrics_host, port=settings.metrics_port)
    except MetricsPortError as exc:
        if port_chosen:
            raise
        print(f"warning: {exc} Running without worker metrics.", file=sys.stderr, flush=True)
        return False
    print(f"Metrics on http://{settings.metrics_host}:{settings.metrics_port}/metrics", flush=True)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m inference",
        description="Serve generate requests from the Redis channel layer with one engine. "
        "Configuration comes from the environment (see README).",
    )
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        settings = WorkerSettings.from_env()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not settings.redis_url:
        print(
            "error: REDIS_URL is not set. A standalone worker talks to the web process "
            "through Redis; without Redis, `make run` runs the worker inside the web "
            "process.",
            file=sys.stderr,
        )
        return 2
    try:
        # before the model loads: a taken port fails in a second, not after minutes
        metrics_start(settings, port_chosen="INFERENCE_METRICS_PORT" in os.environ)
        asyncio.run(_serve(settings))
    except (ModelNotReadyError, EngineError, MetricsPortError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


# The guard matters: vLLM spawns its engine process, which re-imports __main__.
if __name__ == "__main__":
    sys.exit(main())
