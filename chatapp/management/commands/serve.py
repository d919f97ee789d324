"""`manage.py serve`: daphne on one port; in the embedded default, the worker runs here too.

Without Redis the channel layer is in-memory and reaches only this process, so the inference
worker (and its vLLM engine) must live in daphne's event loop. The model is loaded inside that
loop once the server is listening, and the URL is printed when answers can flow.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from inference.engines.base import Engine

# On SIGTERM daphne gives the app this long to close its connections (compose's web
# stop_grace_period is longer: tests/deploy/test_compose.py)
APPLICATION_CLOSE_TIMEOUT_S = 10


class Command(BaseCommand):
    help = "Serve HTTP and WebSockets with daphne (and the embedded inference worker)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--no-worker",
            action="store_true",
            help="do not run the embedded inference worker (workers run elsewhere on Redis)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from channels.layers import get_channel_layer
        from channels.routing import get_default_application
        from daphne.endpoints import build_endpoint_description_strings
        from daphne.server import Server

        from inference.runtime import build_engine, build_faq_cache, start_worker
        from inference.settings import WorkerSettings

        host, port = options["host"], options["port"]
        tls = tls_endpoint(host=host, port=port)
        url = f"{'https' if tls else 'http'}://{host}:{port}/"
        embedded = settings.CHAT_EMBEDDED_WORKER and not options["no_worker"]
        engines: list[Engine] = []
        workers: list[asyncio.Task[Any]] = []  # keeps the task referenced while it runs
        failures: list[str] = []

        def say(text: str) -> None:
            self.stdout.write(text)
            self.stdout.flush()

        def fail(message: str) -> None:
            # A server that cannot answer must not sit on the port looking healthy.
            failures.append(message)
            self.stderr.write(f"error: {message}")
            _stop_reactor()

        def on_ready() -> None:
            # daphne calls this before the reactor's asyncio loop runs; the worker must be
            # created inside the running loop, so schedule it as the loop's first callback.
            from daphne.server import twisted_loop

            twisted_loop.call_soon(start_embedded_worker)

        def start_embedded_worker() -> None:
            from chatapp.answers.runtime import answer_runtime
            from chatapp.faq.snapshots import serve_snapshots
            from chatapp.prompts.prefixes import serve_prefix_lists

            loop = asyncio.get_running_loop()
            # every web process answers workers' FAQ snapshot requests, and starting workers'
            # requests for the published prefixes to warm
            workers.append(loop.create_task(serve_snapshots()))
            workers.append(loop.create_task(serve_prefix_lists()))
            # and runs an answer relay from the start: it finishes answers that a crashed
            # web process left "streaming" (see chatapp/answers/recovery.py)
            workers.append(loop.create_task(answer_runtime()))
            if settings.CELERY_TASK_ALWAYS_EAGER:  # no Celery beat: housekeeping runs here
                from chatapp.maintenance.schedule import beat_schedule_run

                workers.append(loop.create_task(beat_schedule_run(settings.CELERY_BEAT_SCHEDULE)))
            if not embedded:
                say(f"Serving on {url} (workers consume the Redis channel layer).")
                return
            try:
                worker_settings = WorkerSettings.from_env()
                engine = build_engine(worker_settings=worker_settings, progress=say)
                engines.append(engine)
                _, task = start_worker(
                    engine=engine,
                    layer=get_channel_layer(),
                    settings=worker_settings,
                    faq=build_faq_cache(settings=worker_settings, progress=say),
                )
            except Exception as exc:
                fail(str(exc))
                return
            workers.append(task)
            task.add_done_callback(on_worker_exit)
            say(f"Ready: open {url} in your browser.")
            say(f"The chat widget on a demo website: {url}widget/demo/")

        def on_worker_exit(task: asyncio.Task[None]) -> None:
            if not task.cancelled():
                fail(f"the inference worker stopped: {task.exception()!r}")

        endpoints = [tls] if tls else build_endpoint_description_strings(host=host, port=port)
        say(f"Starting daphne on {url} ...")
        server = Server(
            application=get_default_application(),
            endpoints=endpoints,
            ready_callable=on_ready,
            application_close_timeout=APPLICATION_CLOSE_TIMEOUT_S,
            verbosity=0,
        )
        try:
            server.run()
        finally:
            for engine in engines:
                engine.shutdown()
        if failures:
            sys.exit(1)


def tls_endpoint(*, host: str, port: int) -> str | None:
    """Twisted's TLS endpoint for `CHAT_TLS_CERT_FILE`/`CHAT_TLS_KEY_FILE` (None without them).
    With the `http2` extra installed, daphne offers h2 and http/1.1 over ALPN on it."""
    cert, key = settings.CHAT_TLS_CERT_FILE, settings.CHAT_TLS_KEY_FILE
    if not cert:
        return None
    for name, path in (("CHAT_TLS_CERT_FILE", cert), ("CHAT_TLS_KEY_FILE", key)):
        if not Path(path).is_file():
            raise CommandError(f"{name}: no such file: {path}")

    def quoted(value: str) -> str:  # endpoint strings separate fields with ':'
        return value.replace("\\", "\\\\").replace(":", "\\:")

    return (
        f"ssl:port={port}:interface={quoted(host)}:privateKey={quoted(key)}:certKey={quoted(cert)}"
    )


def _stop_reactor() -> None:
    from twisted.internet import reactor

    if reactor.running:
        reactor.stop()
