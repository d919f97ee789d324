"""Worker settings for tests: the scripted engine, in-memory layer, short heartbeats. Imports
nothing of the web side, so the worker's own tests can use it."""

from __future__ import annotations

from typing import Any

from inference.settings import WorkerSettings
from inference.wire.protocol import REQUEST_CHANNEL


def worker_settings(**overrides: Any) -> WorkerSettings:
    values: dict[str, Any] = {
        "engine": "scripted",
        "request_channel": REQUEST_CHANNEL,
        "max_active": 4,
        "coalesce_ms": 15.0,
        "coalesce_tokens": 8,
        "redis_url": "",
        "heartbeat_s": 0.1,
        # no web side answers the published-prefix list in most tests: do not wait for one
        "start_warmup_s": 0.0,
    }
    values.update(overrides)
    return WorkerSettings(**values)
