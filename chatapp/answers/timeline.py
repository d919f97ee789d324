"""Where one answer's time to first token goes in the web process: marks on its clock.

The consumer that reads a send starts the clock; admission, the stored turn and the queued
request mark it (`runs`), the relay marks the first delta it receives, the watching socket the
first delta frame it writes. Each mark has one writer, and all are `time.monotonic()` of this
process, so their differences are exact; the worker's own hops come with its done
(`inference.wire.protocol.WorkerHops`, on the worker's clock). `docs/architecture.md` shows them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class FirstTokenClock:
    received: float = 0.0  # the consumer read the frame (or the API its request)
    admitted: float | None = None  # an admission slot was taken
    stored: float | None = None  # the turn (question + empty answer row) was written
    queued: float | None = None  # the worker request is in its queue
    relay_first_delta: float | None = None  # the relay received the first delta
    socket_first_delta: float | None = None  # the first delta frame was written to the socket

    @classmethod
    def started(cls, received: float | None = None) -> FirstTokenClock:
        return cls(received=time.monotonic() if received is None else received)

    def since_received_ms(self, mark: float | None) -> float | None:
        return None if mark is None else round((mark - self.received) * 1000.0, 2)
