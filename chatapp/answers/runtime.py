"""One relay, log, admission and worker registry per event loop, built from settings.

Redis clients and the relay's channel belong to the loop that made them; daphne has one loop
per process, tests have one per test. `answer_runtime()` builds on first use and starts the
relay; `answer_runtime_close()` stops it (tests, shutdown).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import weakref
from dataclasses import dataclass, replace

from channels.layers import get_channel_layer
from django.conf import settings

from chatapp.admission.limiter import Admission, AdmissionLimits, admission_for
from chatapp.answers.log import AnswerLog
from chatapp.answers.relay import AnswerRelay, RelaySettings
from inference.wire.affinity import AffinityMap, affinity_map
from inference.wire.registry import WorkerRegistry, worker_registry
from inference.wire.request_queue import RequestQueue, request_queue


@dataclass(frozen=True, slots=True)
class AnswerRuntime:
    relay: AnswerRelay
    log: AnswerLog
    admission: Admission
    registry: WorkerRegistry
    queue: RequestQueue
    affinity: AffinityMap | None
    task: asyncio.Task[None]


_runtimes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AnswerRuntime] = (
    weakref.WeakKeyDictionary()
)


def relay_settings() -> RelaySettings:
    return RelaySettings(
        accept_timeout_s=settings.CHAT_ACCEPT_TIMEOUT_S,
        queue_timeout_s=max(settings.CHAT_QUEUE_TIMEOUT_S, settings.CHAT_ACCEPT_TIMEOUT_S),
        stall_timeout_s=settings.CHAT_STALL_TIMEOUT_S,
        first_token_timeout_s=settings.CHAT_FIRST_TOKEN_TIMEOUT_S,
        disconnect_grace_s=settings.CHAT_DISCONNECT_GRACE_S,
        heartbeat_s=settings.CHAT_RELAY_HEARTBEAT_S,
        reap_every_s=settings.CHAT_REAP_EVERY_S,
        owner_silent_after_s=settings.CHAT_REAP_AFTER_S,
        affinity_wait_s=settings.CHAT_AFFINITY_WAIT_S,
        max_migrations=settings.CHAT_MAX_MIGRATIONS,
    )


def admission_limits() -> AdmissionLimits:
    return AdmissionLimits(
        user_max_concurrent=settings.CHAT_USER_MAX_CONCURRENT,
        user_rate=settings.CHAT_USER_RATE,
        user_rate_window_s=settings.CHAT_USER_RATE_WINDOW_S,
        lease_s=settings.CHAT_ADMISSION_LEASE_S,
        busy_retry_after_s=settings.CHAT_BUSY_RETRY_AFTER_S,
    )


def admission_limits_of(*, rate: int, rate_window_s: float, max_concurrent: int) -> AdmissionLimits:
    """The service's limits with a caller's own rate and concurrency: an API key's, or a
    website's per-visitor limits."""
    return replace(
        admission_limits(),
        user_rate=rate,
        user_rate_window_s=float(rate_window_s),
        user_max_concurrent=max_concurrent,
    )


async def answer_runtime() -> AnswerRuntime:
    loop = asyncio.get_running_loop()
    runtime = _runtimes.get(loop)
    if runtime is not None and not runtime.task.done():
        await runtime.relay.ready.wait()
        return runtime
    log = AnswerLog(redis_url=settings.REDIS_URL, ttl_s=settings.CHAT_ANSWER_LOG_TTL_S)
    admission = admission_for(redis_url=settings.REDIS_URL, limits=admission_limits())
    registry = worker_registry(redis_url=settings.REDIS_URL)
    queue = request_queue(redis_url=settings.REDIS_URL)
    affinity = (
        affinity_map(redis_url=settings.REDIS_URL, ttl_s=settings.CHAT_AFFINITY_TTL_S)
        if settings.CHAT_AFFINITY
        else None
    )
    relay = AnswerRelay(
        layer=get_channel_layer(),
        log=log,
        admission=admission,
        registry=registry,
        queue=queue,
        settings=relay_settings(),
        affinity=affinity,
    )
    # A fresh context: the relay outlives whoever first asked for it. Inherited from a Django
    # request, it would keep that request's thread-sensitive executor, which dies with the
    # request, and could then no longer store answers that end later.
    task = loop.create_task(relay.run(), name="answer-relay", context=contextvars.Context())
    runtime = AnswerRuntime(
        relay=relay,
        log=log,
        admission=admission,
        registry=registry,
        queue=queue,
        affinity=affinity,
        task=task,
    )
    _runtimes[loop] = runtime
    await relay.ready.wait()
    return runtime


async def answer_runtime_close() -> None:
    runtime = _runtimes.pop(asyncio.get_running_loop(), None)
    if runtime is None:
        return
    runtime.task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await runtime.task
    resources = (runtime.log, runtime.admission, runtime.registry, runtime.queue, runtime.affinity)
    for resource in resources:
        close = getattr(resource, "aclose", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()
