"""`manage.py serve`: daphne on one port; in the embedded default, the worker runs here too.

Without Redis the channel layer is in-memory and reaches only this process, so the inference
worker (and its vLLM engine) must live in daphne's event loop. The model is loaded inside that
loop once the server is listening, and the URL is printed when answers can flow.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser


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

        from inference.runtime import build_engine, start_worker
        from inference.settings import WorkerSettings

        host, port = options["host"], options["port"]
        url = f"http://{host}:{port}/"
        embedded = settings.CHAT_EMBEDDED_WORKER and not options["no_worker"]
        keep: list[object] = []  # holds the worker task so it is not garbage collected

        def say(text: str) -> None:
            self.stdout.write(text)
            self.stdout.flush()

        def on_ready() -> None:
            # daphne calls this before the reactor's asyncio loop runs; the worker must be
            # created inside the running loop, so schedule it as the loop's first callback.
            from daphne.server import twisted_loop

            twisted_loop.call_soon(start_embedded_worker)

        def start_embedded_worker() -> None:
            if not embedded:
                say(f"Serving on {url} (workers consume the Redis channel layer).")
                return
            worker_settings = WorkerSettings.from_env()
            try:
                engine = build_engine(worker_settings=worker_settings, progress=say)
            except Exception as exc:
                self.stderr.write(f"error: {exc}")
                asyncio.get_running_loop().call_soon(_stop_reactor)
                return
            keep.append(
                start_worker(engine=engine, layer=get_channel_layer(), settings=worker_settings)
            )
            say(f"Ready: open {url} in your browser.")

        endpoints = build_endpoint_description_strings(host=host, port=port)
        say(f"Starting daphne on {url} ...")
        server = Server(
            application=get_default_application(),
            endpoints=endpoints,
            ready_callable=on_ready,
            application_close_timeout=10,
            verbosity=0,
        )
        server.run()
        if not keep and embedded:
            sys.exit(1)


def _stop_reactor() -> None:
    from twisted.internet import reactor

    reactor.stop()
