"""The answer log's contract, run on both Redis servers it meets: a Redis server (the
deployments') and the embedded default's own (6.2). Whatever a relay, a resuming socket or the
reaper does with one must mean the same with the other."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio as aioredis

from chatapp.answers.entries import LoggedDelta, LoggedEnd
from chatapp.answers.log import AnswerLog
from tests.inference.redis_db import EMBEDDED_AND_SERVER, flushed_redis, server_url

REDIS_URL = "redis://127.0.0.1:6379/9"
TTL_S = 60.0

MakeLog = Callable[..., AnswerLog]


@pytest.fixture(params=EMBEDDED_AND_SERVER)
async def db(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, aioredis.Redis]]:
    """The Redis under test (its URL, and a client of it), empty."""
    url = server_url(request.param, REDIS_URL)
    async with flushed_redis(url) as client:
        yield url, client


@pytest.fixture
async def make(db: tuple[str, aioredis.Redis]) -> AsyncIterator[MakeLog]:
    """A log on the Redis under test, with this TTL (seconds)."""
    made: list[AnswerLog] = []

    def _make(ttl_s: float = TTL_S) -> AnswerLog:
        log = AnswerLog(redis_url=db[0], ttl_s=ttl_s)
        made.append(log)
        return log

    yield _make
    for log in made:
        await log.aclose()


def _deltas(*seqs: int) -> list[LoggedDelta]:
    return [LoggedDelta(seq=seq, text=f"<{seq}>") for seq in seqs]


async def _logged(log: AnswerLog, *seqs: int) -> uuid.UUID:
    run_id = uuid.uuid4()
    await log.begin(run_id=run_id, relay_channel="relay-a", user_key="u1")
    for entry in _deltas(*seqs):
        await log.append(run_id=run_id, entry=entry)
    return run_id


async def test_entries_come_back_in_order_after_a_seq(make: MakeLog) -> None:
    log = make()
    run_id = await _logged(log, 1, 2, 3)
    await log.append(run_id=run_id, entry=LoggedEnd(seq=4, status="complete"))
    after_one = await log.entries_after(run_id=run_id, seq=1)
    assert after_one is not None
    assert [e.seq for e in after_one] == [2, 3, 4]
    assert isinstance(after_one[-1], LoggedEnd)
    assert await log.entries_after(run_id=run_id, seq=4) == []


async def test_a_repeated_or_older_seq_is_refused(make: MakeLog) -> None:
    log = make()
    run_id = await _logged(log, 1, 2)
    for seq in (2, 1):
        with pytest.raises(Exception, match=r"(?i)seq|id"):
            await log.append(run_id=run_id, entry=LoggedDelta(seq=seq, text="x"))
    assert [e.seq for e in await log.entries_after(run_id=run_id, seq=0) or []] == [1, 2]


async def test_a_run_never_logged_has_no_log_and_no_owner(make: MakeLog) -> None:
    log = make()
    assert await log.entries_after(run_id=uuid.uuid4(), seq=0) is None
    assert await log.ownership(run_id=uuid.uuid4()) is None


async def test_a_begun_run_with_no_entry_yet_has_an_empty_log(make: MakeLog) -> None:
    """A socket resuming before the first delta must find the run, not "no log" (which reads
    as expired, and the stored row is shown instead)."""
    log = make()
    run_id = await _logged(log)
    assert await log.entries_after(run_id=run_id, seq=0) == []


async def test_ownership_names_the_relay_the_lease_holder_and_the_worker(
    make: MakeLog,
) -> None:
    log = make()
    run_id = await _logged(log, 1)
    await log.worker_taken(run_id=run_id, worker_channel="worker-1", request_id=f"{run_id}~1")
    owner = await log.ownership(run_id=run_id)
    assert owner is not None
    assert (owner.relay_channel, owner.user_key) == ("relay-a", "u1")
    assert (owner.worker_channel, owner.worker_request_id) == ("worker-1", f"{run_id}~1")
    assert 0 <= owner.silent_s < 5


async def test_silence_grows_until_a_heartbeat_and_a_heartbeat_can_hand_over(
    make: MakeLog,
) -> None:
    log = make()
    run_id = await _logged(log, 1)
    await asyncio.sleep(0.3)
    before = await log.ownership(run_id=run_id)
    assert before is not None
    assert before.silent_s >= 0.25
    assert await log.heartbeat(relay_channel="relay-b", lengths={run_id: 1}) == []
    after = await log.ownership(run_id=run_id)
    assert after is not None
    assert after.silent_s < 0.2
    assert (after.relay_channel, after.user_key) == ("relay-b", "u1")


async def test_a_heartbeat_reports_a_log_shorter_than_its_relay_holds(
    make: MakeLog,
) -> None:
    log = make()
    whole, short = await _logged(log, 1, 2), await _logged(log, 1)
    assert await log.heartbeat(relay_channel="relay-a", lengths={whole: 2, short: 3}) == [short]


async def test_a_rewrite_restores_the_log_and_its_owner(make: MakeLog) -> None:
    log = make()
    run_id = uuid.uuid4()
    await log.rewrite(
        run_id=run_id, relay_channel="relay-a", user_key="u1", entries=list(_deltas(1, 2))
    )
    assert [e.seq for e in await log.entries_after(run_id=run_id, seq=0) or []] == [1, 2]
    owner = await log.ownership(run_id=run_id)
    assert owner is not None
    assert (owner.relay_channel, owner.user_key) == ("relay-a", "u1")
    await log.append(run_id=run_id, entry=LoggedDelta(seq=3, text="on"))


async def test_a_log_and_its_owner_expire_ttl_after_the_last_write(make: MakeLog) -> None:
    log = make(ttl_s=0.3)
    run_id = await _logged(log, 1)
    await asyncio.sleep(0.2)
    await log.heartbeat(relay_channel="relay-a", lengths={run_id: 1})
    await log.append(run_id=run_id, entry=LoggedDelta(seq=2, text="kept"))
    await asyncio.sleep(0.2)  # 0.4 s after begin, 0.2 s after the last writes
    assert await log.ownership(run_id=run_id) is not None
    assert await log.entries_after(run_id=run_id, seq=0) is not None
    await asyncio.sleep(0.3)
    assert await log.ownership(run_id=run_id) is None
    assert await log.entries_after(run_id=run_id, seq=0) is None


async def test_a_heartbeat_after_redis_lost_the_owner_asks_for_a_rewrite(
    make: MakeLog, db: tuple[str, aioredis.Redis]
) -> None:
    """Redis restarted without persistence before the first delta: the heartbeat must not
    bring back an owner record without its lease holder (a reaper could then never free the
    user's slot); it reports the run, and the relay rewrites log and owner whole."""
    log = make()
    run_id = await _logged(log)
    await db[1].flushdb()
    assert await log.heartbeat(relay_channel="relay-a", lengths={run_id: 0}) == [run_id]


async def test_a_worker_taking_a_run_whose_record_is_gone_leaves_no_key_behind(
    make: MakeLog, db: tuple[str, aioredis.Redis]
) -> None:
    log = make()
    run_id = uuid.uuid4()  # no begin: its record expired, or Redis lost it
    await log.worker_taken(run_id=run_id, worker_channel="worker-1", request_id="r")
    assert await log.ownership(run_id=run_id) is None
    ttls = [await db[1].pttl(key) for key in await db[1].keys("*")]
    assert all(ttl > 0 for ttl in ttls), ttls


async def test_a_worker_taking_a_live_run_keeps_the_expiry_its_heartbeats_set(
    make: MakeLog, db: tuple[str, aioredis.Redis]
) -> None:
    log = make(ttl_s=TTL_S)
    run_id = await _logged(log)
    (owner,) = await db[1].keys("*:owner")
    await db[1].pexpire(owner, 5_000)  # as if the owner was silent for TTL_S - 5 s
    await log.worker_taken(run_id=run_id, worker_channel="worker-1", request_id="r")
    assert 0 < await db[1].pttl(owner) <= 5_000
    ownership = await log.ownership(run_id=run_id)
    assert ownership is not None
    assert (ownership.worker_channel, ownership.worker_request_id) == ("worker-1", "r")
