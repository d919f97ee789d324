"""Admission with per-call limits (what API keys use), on both Redis servers: a key's own rate,
window and concurrency apply to it alone, while the service's capacity stays shared."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
import redis.asyncio as aioredis

from chatapp.admission import Admission, AdmissionLimits, Admitted
from chatapp.admission.limiter import Refused
from tests.inference.redis_db import EMBEDDED_AND_SERVER, server_url

REDIS_URL = "redis://127.0.0.1:6379/12"
DEFAULT = AdmissionLimits(
    user_max_concurrent=1,
    user_rate=100,
    user_rate_window_s=1.0,
    lease_s=60,
    busy_retry_after_s=5,
)
KEY = replace(DEFAULT, user_max_concurrent=3, user_rate=2, user_rate_window_s=3.0)


@pytest.fixture(params=EMBEDDED_AND_SERVER)
async def admission(request: pytest.FixtureRequest) -> AsyncIterator[Admission]:
    url = server_url(request.param, REDIS_URL)
    prefix = f"test:key-admission:{uuid.uuid4().hex}"
    made = Admission(redis_url=url, limits=DEFAULT, prefix=prefix)
    yield made
    await made.aclose()
    client = aioredis.Redis.from_url(url)
    keys = [key async for key in client.scan_iter(f"{prefix}:*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()


async def test_a_keys_limits_apply_to_it_and_not_to_others(admission: Admission) -> None:
    # concurrency 3 for the key where users get 1
    for n in range(2):
        decision = await admission.acquire(
            request_id=f"k{n}", user_key="apikey:1", capacity=10, limits=KEY
        )
        assert isinstance(decision, Admitted)
    assert isinstance(await admission.acquire(request_id="u1", user_key="u", capacity=10), Admitted)
    refused = await admission.acquire(request_id="u2", user_key="u", capacity=10)
    assert isinstance(refused, Refused)
    assert refused.reason == "user_concurrency"
    # rate 2 per 3 s for the key: the third start is refused until the first leaves the window
    third = await admission.acquire(request_id="k2", user_key="apikey:1", capacity=10, limits=KEY)
    assert isinstance(third, Refused)
    assert third.reason == "rate_limited"
    assert third.retry_after_s == 3
    # capacity is shared: 3 held, capacity 3 -> busy for anyone
    busy = await admission.acquire(request_id="v1", user_key="v", capacity=3)
    assert isinstance(busy, Refused)
    assert busy.reason == "busy"


async def test_a_keys_longer_window_outlives_the_default_one(admission: Admission) -> None:
    slow = replace(DEFAULT, user_rate=1, user_rate_window_s=3.0)
    first = await admission.acquire(request_id="a", user_key="apikey:2", capacity=10, limits=slow)
    assert isinstance(first, Admitted)
    await admission.release(request_id="a", user_key="apikey:2")
    await asyncio.sleep(1.3)  # past the default 1 s window, within the key's 3 s
    again = await admission.acquire(request_id="b", user_key="apikey:2", capacity=10, limits=slow)
    assert isinstance(again, Refused)
    assert again.reason == "rate_limited"
    assert again.retry_after_s == 2
