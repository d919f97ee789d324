"""Admission control on the embedded Redis and on a Redis server (db 11, flushed)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import pytest
import redis.asyncio as aioredis

from chatapp.admission import Admission, AdmissionLimits, Admitted, Refused
from chatapp.admission.limiter import GroupLimits, Lease, grouped_user_key
from tests.inference.redis_db import EMBEDDED_AND_SERVER, flushed_redis, server_url

REDIS_URL = "redis://127.0.0.1:6379/11"

LIMITS = AdmissionLimits(
    user_max_concurrent=100,
    user_rate=1000,
    user_rate_window_s=60,
    lease_s=60,
    busy_retry_after_s=5,
)

Make = Callable[..., Admission]


@pytest.fixture
async def redis_db() -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
    await client.flushdb()
    yield client
    await client.flushdb()
    await client.aclose()


@pytest.fixture(params=EMBEDDED_AND_SERVER)
async def make(request: pytest.FixtureRequest) -> AsyncIterator[Make]:
    """Build a limiter on the Redis under test with LIMITS changed by the keyword arguments."""
    made: list[Admission] = []
    url = server_url(request.param, REDIS_URL)

    def _make(**overrides: Any) -> Admission:
        admission = Admission(redis_url=url, limits=replace(LIMITS, **overrides))
        made.append(admission)
        return admission

    async with flushed_redis(url):
        yield _make
        for admission in made:
            await admission.aclose()


def refusal(result: Admitted | Refused) -> Refused:
    assert isinstance(result, Refused), result
    return result


async def test_no_capacity_means_no_worker(make: Make) -> None:
    admission = make()
    for capacity in (0, -1):
        refused = refusal(await admission.acquire(request_id="r1", user_key="u", capacity=capacity))
        assert refused.reason == "no_worker"
        assert refused.retry_after_s == 5
        assert refused.message == (
            "The assistant is not available right now. Please try again in 5 seconds."
        )
    assert await admission.outstanding() == 0


async def test_full_service_is_busy_until_a_release(make: Make) -> None:
    admission = make()
    assert await admission.acquire(request_id="a", user_key="u1", capacity=2) == Admitted("a")
    assert await admission.acquire(request_id="b", user_key="u2", capacity=2) == Admitted("b")
    assert await admission.outstanding() == 2

    refused = refusal(await admission.acquire(request_id="c", user_key="u3", capacity=2))
    assert refused.reason == "busy"
    assert refused.retry_after_s == 5
    assert refused.message == "The assistant is busy right now. Please try again in 5 seconds."

    # more capacity (a worker joined) admits at once
    assert isinstance(await admission.acquire(request_id="c", user_key="u3", capacity=3), Admitted)
    await admission.release(request_id="a", user_key="u1")
    assert isinstance(await admission.acquire(request_id="d", user_key="u4", capacity=3), Admitted)
    assert await admission.outstanding() == 3


async def test_user_concurrency_is_per_user(make: Make) -> None:
    admission = make(user_max_concurrent=1)
    assert isinstance(
        await admission.acquire(request_id="a1", user_key="alice", capacity=10), Admitted
    )
    refused = refusal(await admission.acquire(request_id="a2", user_key="alice", capacity=10))
    assert refused.reason == "user_concurrency"
    assert refused.retry_after_s >= 1
    assert "wait for the current answer" in refused.message

    assert isinstance(
        await admission.acquire(request_id="b1", user_key="bob", capacity=10), Admitted
    )
    await admission.release(request_id="a1", user_key="alice")
    assert isinstance(
        await admission.acquire(request_id="a2", user_key="alice", capacity=10), Admitted
    )


async def test_user_concurrency_message_names_a_limit_above_one(make: Make) -> None:
    admission = make(user_max_concurrent=2)
    for request_id in ("a1", "a2"):
        assert isinstance(
            await admission.acquire(request_id=request_id, user_key="alice", capacity=10), Admitted
        )
    refused = refusal(await admission.acquire(request_id="a3", user_key="alice", capacity=10))
    assert refused.message == (
        "You already have 2 answers in progress. Please wait for one to finish before asking again."
    )


async def test_rate_limit_retry_after_is_when_the_oldest_request_leaves(make: Make) -> None:
    admission = make(user_rate=2, user_rate_window_s=1.2)
    started = time.monotonic()
    assert isinstance(await admission.acquire(request_id="r1", user_key="u", capacity=10), Admitted)
    await asyncio.sleep(0.5)
    assert isinstance(await admission.acquire(request_id="r2", user_key="u", capacity=10), Admitted)

    # r1 leaves the window in ~0.7 s (-> 1 s); counting from r2 or the window would say 2 s
    refused = refusal(await admission.acquire(request_id="r3", user_key="u", capacity=10))
    assert refused.reason == "rate_limited"
    assert refused.retry_after_s == 1
    assert refused.message == "You are sending messages too quickly. Please try again in 1 second."
    # another user is not affected
    assert isinstance(
        await admission.acquire(request_id="x", user_key="other", capacity=10), Admitted
    )

    await asyncio.sleep(max(0.0, started + 1.3 - time.monotonic()))
    assert isinstance(await admission.acquire(request_id="r3", user_key="u", capacity=10), Admitted)
    # r2 and r3 are in the window now: full again
    assert refusal(await admission.acquire(request_id="r4", user_key="u", capacity=10)).reason == (
        "rate_limited"
    )


async def test_refused_requests_consume_nothing(make: Make) -> None:
    admission = make(user_rate=2, user_max_concurrent=1)

    async def alice_refused_three_times(request_id: str, capacity: int, reason: str) -> None:
        for _ in range(3):
            refused = refusal(
                await admission.acquire(request_id=request_id, user_key="alice", capacity=capacity)
            )
            assert refused.reason == reason

    assert isinstance(await admission.acquire(request_id="b", user_key="bob", capacity=1), Admitted)
    await alice_refused_three_times("a1", capacity=1, reason="busy")
    await admission.release(request_id="b", user_key="bob")
    assert isinstance(
        await admission.acquire(request_id="a1", user_key="alice", capacity=1), Admitted
    )
    await alice_refused_three_times("a2", capacity=5, reason="user_concurrency")
    await admission.release(request_id="a1", user_key="alice")
    # alice's second start only: the five refusals did not count against her rate
    assert isinstance(
        await admission.acquire(request_id="a2", user_key="alice", capacity=5), Admitted
    )
    await admission.release(request_id="a2", user_key="alice")
    refused = refusal(await admission.acquire(request_id="a3", user_key="alice", capacity=5))
    assert refused.reason == "rate_limited"
    # the rate refusal took no lease either
    assert await admission.outstanding() == 0


ADDRESS = GroupLimits(max_concurrent=2, rate=3, rate_window_s=60)


async def test_a_group_bounds_its_users_together_and_each_user_alone(make: Make) -> None:
    """Visitors from one network address share its limits on top of their own."""
    admission = make(user_max_concurrent=1, group=ADDRESS)
    a, b, c = (grouped_user_key(user, "office") for user in ("a", "b", "c"))
    assert isinstance(await admission.acquire(request_id="1", user_key=a, capacity=10), Admitted)
    # a's own limit first: one answer at a time
    assert refusal(await admission.acquire(request_id="2", user_key=a, capacity=10)).reason == (
        "user_concurrency"
    )
    # the same request id from another user of the group is another request
    assert isinstance(await admission.acquire(request_id="1", user_key=b, capacity=10), Admitted)
    refused = refusal(await admission.acquire(request_id="1", user_key=c, capacity=10))
    assert refused.reason == "group_concurrency"
    assert refused.message == (
        "Too many answers are in progress for your network. Please try again in 5 seconds."
    )
    # another group, and a user in no group, are not affected
    other = grouped_user_key("d", "home")
    assert isinstance(
        await admission.acquire(request_id="1", user_key=other, capacity=10), Admitted
    )
    assert isinstance(await admission.acquire(request_id="9", user_key="e", capacity=10), Admitted)

    await admission.release(request_id="1", user_key=a)
    assert isinstance(await admission.acquire(request_id="1", user_key=c, capacity=10), Admitted)
    await admission.release(request_id="1", user_key=b)
    # three starts in the window from the group (a, b, c): the fourth waits for the first
    refused = refusal(await admission.acquire(request_id="3", user_key=b, capacity=10))
    assert refused.reason == "group_rate_limited"
    assert 58 <= refused.retry_after_s <= 60
    assert refused.message.startswith("Too many questions are coming from your network.")
    assert await admission.outstanding() == 3  # c, d and e (a and b released)


async def test_a_users_own_limits_hold_whichever_group_it_comes_from(make: Make) -> None:
    """A visitor moving to another network is still one visitor."""
    admission = make(user_max_concurrent=1, group=ADDRESS)
    at_home, on_phone = grouped_user_key("a", "home"), grouped_user_key("a", "phone")
    assert isinstance(
        await admission.acquire(request_id="1", user_key=at_home, capacity=10), Admitted
    )
    assert refusal(
        await admission.acquire(request_id="2", user_key=on_phone, capacity=10)
    ).reason == ("user_concurrency")


async def test_a_refunded_or_expired_group_lease_frees_the_group(make: Make) -> None:
    admission = make(lease_s=0.3, group=replace(ADDRESS, max_concurrent=1, rate=1))
    a, b = grouped_user_key("a", "office"), grouped_user_key("b", "office")
    assert isinstance(await admission.acquire(request_id="1", user_key=a, capacity=10), Admitted)
    await admission.release(request_id="1", user_key=a, refund=True)  # nothing started
    assert isinstance(await admission.acquire(request_id="2", user_key=b, capacity=10), Admitted)
    await admission.renew(leases=[Lease(request_id="2", user_key=b)])
    await asyncio.sleep(0.35)  # b's web process died: its lease expires with the group's
    refused = refusal(await admission.acquire(request_id="3", user_key=a, capacity=10))
    assert refused.reason == "group_rate_limited"  # the concurrency is free; the rate is not


def test_a_group_name_cannot_smuggle_another_user_key() -> None:
    with pytest.raises(ValueError, match="may not contain"):
        grouped_user_key("a@x", "office")
    with pytest.raises(ValueError, match="may not contain"):
        grouped_user_key("a", "office@x")


async def test_an_unreleased_lease_expires(make: Make) -> None:
    admission = make(lease_s=0.3)
    assert isinstance(
        await admission.acquire(request_id="lost", user_key="u1", capacity=1), Admitted
    )
    assert refusal(await admission.acquire(request_id="b", user_key="u2", capacity=1)).reason == (
        "busy"
    )
    await asyncio.sleep(0.35)
    assert await admission.outstanding() == 0
    assert isinstance(await admission.acquire(request_id="b", user_key="u2", capacity=1), Admitted)


async def test_an_expired_lease_frees_the_users_slot_too(make: Make) -> None:
    admission = make(lease_s=0.3, user_max_concurrent=1)
    assert isinstance(
        await admission.acquire(request_id="lost", user_key="u", capacity=5), Admitted
    )
    await asyncio.sleep(0.35)
    assert isinstance(
        await admission.acquire(request_id="next", user_key="u", capacity=5), Admitted
    )


async def test_release_is_idempotent_and_scoped_to_the_user(make: Make) -> None:
    admission = make()
    assert isinstance(
        await admission.acquire(request_id="r", user_key="alice", capacity=5), Admitted
    )
    await admission.release(request_id="r", user_key="bob")  # not bob's: nothing happens
    await admission.release(request_id="never", user_key="alice")
    assert await admission.outstanding() == 1
    await admission.release(request_id="r", user_key="alice")
    await admission.release(request_id="r", user_key="alice")
    assert await admission.outstanding() == 0


async def test_acquiring_a_held_request_again_does_not_count_twice(make: Make) -> None:
    admission = make(user_rate=2, user_max_concurrent=1)
    for _ in range(3):  # e.g. a retried call whose first answer was lost
        assert await admission.acquire(request_id="r", user_key="u", capacity=1) == Admitted("r")
    assert await admission.outstanding() == 1
    await admission.release(request_id="r", user_key="u")
    assert isinstance(await admission.acquire(request_id="s", user_key="u", capacity=1), Admitted)


async def test_concurrent_acquires_never_exceed_capacity(make: Make) -> None:
    admission = make()
    results = await asyncio.gather(
        *(admission.acquire(request_id=f"r{i}", user_key=f"u{i}", capacity=10) for i in range(200))
    )
    admitted = [r for r in results if isinstance(r, Admitted)]
    assert len(admitted) == 10
    assert all(refusal(r).reason == "busy" for r in results if not isinstance(r, Admitted))
    assert await admission.outstanding() == 10


async def test_concurrent_acquires_of_one_user_respect_the_user_limit(make: Make) -> None:
    admission = make(user_max_concurrent=3)
    results = await asyncio.gather(
        *(admission.acquire(request_id=f"r{i}", user_key="u", capacity=50) for i in range(50))
    )
    assert sum(isinstance(r, Admitted) for r in results) == 3


async def test_one_draft_per_user_per_interval_and_users_apart(make: Make) -> None:
    admission = make()
    assert await admission.draft_take(user_key="u", every_s=0.3)
    assert not await admission.draft_take(user_key="u", every_s=0.3)  # within the interval
    assert await admission.draft_take(user_key="v", every_s=0.3)  # another user's own
    await asyncio.sleep(0.35)
    assert await admission.draft_take(user_key="u", every_s=0.3)


async def test_no_draft_limit_at_zero(make: Make) -> None:
    admission = make()
    assert all([await admission.draft_take(user_key="u", every_s=0) for _ in range(5)])


@pytest.mark.redis
async def test_a_users_draft_limit_holds_across_web_processes(redis_db: aioredis.Redis) -> None:
    one = Admission(redis_url=REDIS_URL, limits=LIMITS)
    two = Admission(redis_url=REDIS_URL, limits=LIMITS)
    try:
        assert await one.draft_take(user_key="u", every_s=5)
        assert not await two.draft_take(user_key="u", every_s=5)
        assert 0 < await redis_db.pttl("chat:admission:user:u:draft") <= 5000  # leaves nothing
    finally:
        await one.aclose()
        await two.aclose()


@pytest.mark.redis
async def test_web_processes_share_the_limits(redis_db: aioredis.Redis) -> None:
    one = Admission(redis_url=REDIS_URL, limits=replace(LIMITS, user_max_concurrent=1))
    two = Admission(redis_url=REDIS_URL, limits=replace(LIMITS, user_max_concurrent=1))
    try:
        assert isinstance(await one.acquire(request_id="a", user_key="u", capacity=2), Admitted)
        assert refusal(await two.acquire(request_id="b", user_key="u", capacity=2)).reason == (
            "user_concurrency"
        )
        assert isinstance(await two.acquire(request_id="c", user_key="v", capacity=2), Admitted)
        assert refusal(await two.acquire(request_id="d", user_key="w", capacity=2)).reason == "busy"
        await two.release(request_id="a", user_key="u")
        assert await one.outstanding() == 1
    finally:
        await one.aclose()
        await two.aclose()


@pytest.mark.redis
async def test_redis_keys_expire_so_idle_users_leave_nothing(redis_db: aioredis.Redis) -> None:
    admission = Admission(
        redis_url=REDIS_URL, limits=replace(LIMITS, lease_s=30, user_rate_window_s=10), prefix="t"
    )
    try:
        assert isinstance(
            await admission.acquire(request_id="r", user_key="u", capacity=1), Admitted
        )
        keys = sorted(await redis_db.keys("t:*"))
        assert keys == ["t:leases", "t:user:u:leases", "t:user:u:starts"]
        assert 30_000 < await redis_db.pttl("t:leases") <= 31_000
        assert 30_000 < await redis_db.pttl("t:user:u:leases") <= 31_000
        assert 10_000 < await redis_db.pttl("t:user:u:starts") <= 11_000
        await admission.release(request_id="r", user_key="u")
        # emptied sets vanish at once; the rate window stays until it has passed
        assert await redis_db.keys("t:*") == ["t:user:u:starts"]
    finally:
        await admission.aclose()


@pytest.mark.redis
async def test_redis_admission_works_again_after_its_connections_drop(
    redis_db: aioredis.Redis,
) -> None:
    admission = Admission(redis_url=REDIS_URL, limits=LIMITS)
    try:
        assert isinstance(
            await admission.acquire(request_id="a", user_key="u", capacity=5), Admitted
        )
        me = await redis_db.client_id()
        for client in await redis_db.client_list():  # only db 11: the server is shared
            if int(client["db"]) == 11 and int(client["id"]) != me:
                await redis_db.client_kill_filter(_id=client["id"])
        admission._acquire.sha = "0" * 40  # as after a restart: the script cache is empty
        assert isinstance(
            await admission.acquire(request_id="b", user_key="u", capacity=5), Admitted
        )
        assert await admission.outstanding() == 2
    finally:
        await admission.aclose()
