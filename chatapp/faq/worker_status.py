"""What decides each worker's FAQ answers, as the workers last said (for the admin's FAQ list).

Every worker's FAQ sync request (every `INFERENCE_FAQ_RESYNC_S`, `inference/faq/sync.py`)
carries its decider's description: the learned verifier with its threshold, or "exact repeats
only" with the verifier's training progress. The web process that answers the request records
it here, in Redis (the admin may be served by another web process; the embedded default uses
its process's own Redis). An entry is forgotten after `TTL_S`
without news, so a stopped worker drops out of the list.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import redis
from django.conf import settings

from inference.wire.embedded_redis import embedded_redis_url

TTL_S = 120.0
KEY_PREFIX = "faq:decision:"


@dataclass(frozen=True, slots=True)
class WorkerFaqStatus:
    worker: str
    decision: str
    age_s: float


def record(*, worker: str, decision: str) -> None:
    """Blocking (a Redis SET with a TTL); call from a thread or a sync context."""
    if not decision:
        return
    with _client() as client:
        client.set(
            KEY_PREFIX + worker,
            json.dumps({"decision": decision, "at": time.time()}),
            ex=int(TTL_S),
        )


def current() -> list[WorkerFaqStatus]:
    """The workers heard from within `TTL_S`, newest first; [] when Redis cannot be read."""
    now = time.time()
    found: list[tuple[str, str, float]] = []
    try:
        with _client() as client:
            for key in client.scan_iter(match=KEY_PREFIX + "*", count=100):
                raw = client.get(key)
                if raw is None:
                    continue
                data = json.loads(raw)
                name = key.decode() if isinstance(key, bytes) else str(key)
                found.append((name.removeprefix(KEY_PREFIX), data["decision"], data["at"]))
    except redis.RedisError:
        return []
    fresh = [(w, text, at) for w, text, at in found if now - at <= TTL_S]
    return [
        WorkerFaqStatus(worker=w, decision=text, age_s=max(0.0, now - at))
        for w, text, at in sorted(fresh, key=lambda item: -item[2])
    ]


def _client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL or embedded_redis_url(), socket_timeout=2)
