"""A real HTTP receiver for the handoff webhook's tests: a local `http.server` on a thread that
checks each delivery's signature with the snippet docs/handoff.md gives receivers, records it,
and answers with the statuses it is told (200 once those run out), optionally slowly."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[3] / "docs" / "handoff.md"
SECRET = "test-webhook-secret-0123456789"

Verify = Callable[[str, Mapping[str, str], bytes], bool]


def documented_verify() -> Verify:
    """The receiver's check as docs/handoff.md#webhook shows it (its one Python block)."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## Webhook\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 1, "the Webhook section shows one Python block"
    namespace: dict[str, Any] = {}
    exec(blocks[0], namespace)  # noqa: S102 - our own docs, run as a receiver would
    verify: Verify = namespace["webhook_verified"]
    return verify


@dataclass(frozen=True, slots=True)
class Received:
    headers: dict[str, str]
    body: bytes
    signed: bool  # the documented check passed
    answered: int  # the status the receiver answered with

    @property
    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.body)
        return data

    @property
    def event(self) -> str:
        return self.headers["X-Chat-Event"]


@dataclass
class Receiver:
    url: str
    statuses: list[int] = field(default_factory=list)  # answered in turn, then 200
    delay_s: float = 0.0
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def accepted(self) -> list[Received]:
        with self.lock:
            return [r for r in self.received if 200 <= r.answered < 300]

    def wait_accepted(self, count: int, *, timeout_s: float = 10) -> list[Received]:
        deadline = time.monotonic() + timeout_s
        while len(accepted := self.accepted()) < count:
            assert time.monotonic() < deadline, f"{len(accepted)} of {count} deliveries arrived"
            time.sleep(0.02)
        return accepted


@contextmanager
def running_receiver() -> Iterator[Receiver]:
    verify = documented_verify()
    receiver = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # http.server calls it by this name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            headers = {name: value for name, value in self.headers.items()}
            if receiver.delay_s:
                time.sleep(receiver.delay_s)
            with receiver.lock:
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                receiver.received.append(
                    Received(headers, body, verify(SECRET, headers, body), status)
                )
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet test output

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/chat"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
