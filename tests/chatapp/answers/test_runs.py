"""The life of a run, piece by piece: the relay, the log, recovery and the final write, each
with the real parts (in-memory layer, the embedded Redis, SQLite) and the Redis server where a
test restarts it.

What a user would notice if these broke: a reload showing an earlier answer than the one that
streamed, a resume shown "complete" for an answer still being written, a healthy log deleted
and rewritten (a resume meanwhile gets nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import redis.asyncio as aioredis
from asgiref.sync import sync_to_async
from channels.layers import InMemoryChannelLayer
from django.contrib.auth.models import User

from chatapp.admission.limiter import Admission
from chatapp.answers.entries import LogEntry, LoggedDelta, LoggedEnd
from chatapp.answers.follower import RunWatch, StoredAnswer, run_rest
from chatapp.answers.log import AnswerLog
from chatapp.answers.recovery import Orphans, answer_store, orphaned_runs_finish
from chatapp.answers.relay import AnswerRelay, RelaySettings
from chatapp.answers.runtime import admission_limits
from chatapp.conversations import services
from chatapp.conversations.models import Message
from chatapp.metrics import registry
from inference.wire.protocol import (
    Accepted,
    Delta,
    GenerateRequest,
    Heartbeat,
    SamplingOptions,
)
from inference.wire.registry import RedisWorkerRegistry
from inference.wire.request_queue import RequestQueue, request_queue
from tests.support.conversations import first_turn
from tests.support.embedded import fresh_registry
from tests.support.waiting import until
from tests.support.wire import done

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_URL = "redis://127.0.0.1:6379/12"


@pytest.fixture
async def redis_db() -> AsyncIterator[aioredis.Redis]:
    """Database 12 of the local Redis, emptied before and after the test."""
    client = aioredis.Redis.from_url(REDIS_URL)
    await client.flushdb()
    yield client
    await client.flushdb()
    await client.aclose()


async def _logged_run(log: AnswerLog, run_id: uuid.UUID, text: str) -> None:
    await log.begin(run_id=run_id, relay_channel="relay-1", user_key="u")
    await log.append(run_id=run_id, entry=LoggedDelta(seq=1, text=text))
    await log.append(run_id=run_id, entry=LoggedEnd(seq=2, status="complete"))


def _orphans(log: AnswerLog, *, silent_after_s: float) -> Orphans:
    return Orphans(
        log=log,
        admission=Admission(redis_url="", limits=admission_limits()),
        layer=InMemoryChannelLayer(),
        silent_after_s=silent_after_s,
    )


async def test_the_reaper_never_writes_an_earlier_run_into_an_edited_answer(alice: User) -> None:
    log = AnswerLog(redis_url="", ttl_s=60)
    turn = await sync_to_async(first_turn)(alice, "old question")
    first_run = turn.run_id
    await _logged_run(log, first_run, "the old answer")
    stored = await answer_store(
        message_id=turn.assistant_message.id,
        run_id=first_run,
        content="the old answer",
        end=LoggedEnd(seq=2, status="complete"),
    )
    assert stored
    await asyncio.sleep(0.3)  # the first run's owner is now silent past the reap age

    edited = await sync_to_async(services.rerun_store)(
        services.Rerun(
            sender=alice, message_id=turn.user_message.id, client_id=uuid.uuid4(), text="new"
        ),
        run_id=uuid.uuid4(),
        answer_id=uuid.uuid4(),
    )
    # A reaper tick lands before the new run's owner has written anything.
    assert await orphaned_runs_finish(orphans=_orphans(log, silent_after_s=0.2)) == 0
    fenced_before = registry.ANSWER_WRITES_FENCED._value.get()
    late = await answer_store(  # a stale relay of the first run writes late
        message_id=turn.assistant_message.id,
        run_id=first_run,
        content="the old answer",
        end=LoggedEnd(seq=2, status="complete"),
    )
    new = await answer_store(
        message_id=turn.assistant_message.id,
        run_id=edited.run_id,
        content="the new answer",
        end=LoggedEnd(seq=2, status="complete"),
    )

    row = await Message.objects.aget(id=turn.assistant_message.id)
    assert (late, new) == (False, True)
    assert (row.status, row.content) == ("complete", "the new answer")
    assert registry.ANSWER_WRITES_FENCED._value.get() == fenced_before + 1


async def test_the_reaper_ends_a_run_whose_owner_went_silent_from_its_log(alice: User) -> None:
    log = AnswerLog(redis_url="", ttl_s=60)
    turn = await sync_to_async(first_turn)(alice, "question")
    await log.begin(run_id=turn.run_id, relay_channel="dead-relay", user_key="u")
    await log.append(run_id=turn.run_id, entry=LoggedDelta(seq=1, text="half an ans"))
    await asyncio.sleep(0.3)

    assert await orphaned_runs_finish(orphans=_orphans(log, silent_after_s=0.2)) == 1

    row = await Message.objects.aget(id=turn.assistant_message.id)
    assert (row.status, row.error_code, row.content) == ("failed", "interrupted", "half an ans")


async def test_a_process_never_reaps_a_run_it_owns_itself(alice: User) -> None:
    """Embedded (one process) an owner's heartbeat can look old after a stalled event loop;
    its own runs are alive all the same."""
    log = AnswerLog(redis_url="", ttl_s=60)
    turn = await sync_to_async(first_turn)(alice, "question")
    await log.begin(run_id=turn.run_id, relay_channel="this-relay", user_key="u")
    await asyncio.sleep(0.3)
    orphans = _orphans(log, silent_after_s=0.2)
    mine = Orphans(
        log=log,
        admission=orphans.admission,
        layer=orphans.layer,
        silent_after_s=0.2,
        owned_here=lambda run_id: run_id == turn.run_id,
    )

    assert await orphaned_runs_finish(orphans=mine) == 0
    row = await Message.objects.aget(id=turn.assistant_message.id)
    assert row.status == "streaming"


async def test_the_reaper_reaches_an_orphan_behind_more_live_runs_than_it_reads_at_once(
    alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31 defect 12: each pass read the same first 500 streaming runs, in no order, so
    with more live answers than that an orphan beyond them was never ended. Passes now walk
    all of them, oldest first, a page at a time."""
    from chatapp.answers import recovery

    monkeypatch.setattr(recovery, "REAP_PAGE", 3)
    log = AnswerLog(redis_url="", ttl_s=60)
    live = [await sync_to_async(first_turn)(alice, f"live {n}") for n in range(5)]
    for turn in live:
        await log.begin(run_id=turn.run_id, relay_channel="this-relay", user_key="u")
    orphan = await sync_to_async(first_turn)(alice, "the orphan")
    await log.begin(run_id=orphan.run_id, relay_channel="dead-relay", user_key="u")
    await asyncio.sleep(0.3)
    live_ids = {turn.run_id for turn in live}
    orphans = Orphans(
        log=log,
        admission=Admission(redis_url="", limits=admission_limits()),
        layer=InMemoryChannelLayer(),
        silent_after_s=0.2,
        owned_here=lambda run_id: run_id in live_ids,
    )

    ended = [await orphaned_runs_finish(orphans=orphans) for _ in range(3)]

    assert ended == [0, 1, 0]  # the second page has it; the third pass starts over
    row = await Message.objects.aget(id=orphan.assistant_message.id)
    assert (row.status, row.error_code) == ("failed", "interrupted")
    for turn in live:
        assert (await Message.objects.aget(id=turn.assistant_message.id)).status == "streaming"


async def test_a_resume_waits_while_a_live_owner_stores_the_answer(alice: User) -> None:
    """The end is logged before the row is written: a watcher must not be told the answer
    is complete while a reload would still find it streaming."""
    log = AnswerLog(redis_url="", ttl_s=60)
    turn = await sync_to_async(first_turn)(alice, "question")
    await _logged_run(log, turn.run_id, "the answer")
    watch = RunWatch(
        message_id=turn.assistant_message.id, run_id=turn.run_id, owner="relay-1", client_id=None
    )

    async def load_row() -> Message | None:
        return await Message.objects.filter(id=turn.assistant_message.id).afirst()

    orphans = _orphans(log, silent_after_s=30)
    while_storing = await run_rest(orphans=orphans, watch=watch, load_row=load_row)
    await answer_store(
        message_id=turn.assistant_message.id,
        run_id=turn.run_id,
        content="the answer",
        end=LoggedEnd(seq=2, status="complete"),
    )
    stored = await run_rest(orphans=orphans, watch=watch, load_row=load_row)

    assert while_storing is None
    assert isinstance(stored, list)
    assert [e.kind for e in stored] == ["delta", "end"]


async def test_a_replaced_run_is_not_shown_as_the_rest_of_the_old_one(alice: User) -> None:
    log = AnswerLog(redis_url="", ttl_s=60)
    turn = await sync_to_async(first_turn)(alice, "question")
    watch = RunWatch(
        message_id=turn.assistant_message.id, run_id=uuid.uuid4(), owner="", client_id=None
    )

    async def load_row() -> Message | None:
        return await Message.objects.filter(id=turn.assistant_message.id).afirst()

    rest = await run_rest(orphans=_orphans(log, silent_after_s=30), watch=watch, load_row=load_row)
    assert isinstance(rest, StoredAnswer)
    assert (rest.content, rest.end.status) == ("", "failed")


# ---- the relay's log and heartbeats ---------------------------------------------------------


class SlowLog(AnswerLog):
    """Appends take a moment (a Redis round trip); counts rewrites of whole logs."""

    rewrites = 0

    async def append(self, *, run_id: uuid.UUID, entry: LogEntry) -> None:
        await asyncio.sleep(0.002)
        await super().append(run_id=run_id, entry=entry)

    async def rewrite(
        self, *, run_id: uuid.UUID, relay_channel: str, user_key: str, entries: list[LogEntry]
    ) -> None:
        self.rewrites += 1
        await super().rewrite(
            run_id=run_id, relay_channel=relay_channel, user_key=user_key, entries=entries
        )


@dataclass
class RunningRelay:
    relay: AnswerRelay
    layer: InMemoryChannelLayer
    task: asyncio.Task[None]
    registry: RedisWorkerRegistry


async def _relay_running(
    *,
    log: AnswerLog | None = None,
    queue: RequestQueue | None = None,
    workers: tuple[str, ...] = ("w",),
    **bounds: float,
) -> RunningRelay:
    """A relay on the in-memory layer with live `workers`, running; 10 s bounds unless given."""
    layer = InMemoryChannelLayer(capacity=10_000)
    registry_ = fresh_registry()
    for worker in workers:
        await registry_.announce(worker_id=worker, capacity=4, ttl_s=60)
    values: dict[str, float] = {
        "accept_timeout_s": 10,
        "queue_timeout_s": 10,
        "stall_timeout_s": 10,
        "disconnect_grace_s": 10,
        "heartbeat_s": 0.1,
        "reap_every_s": 60,
        "owner_silent_after_s": 60,
        **bounds,
    }
    relay = AnswerRelay(
        layer=layer,
        log=log or AnswerLog(redis_url="", ttl_s=60),
        admission=Admission(redis_url="", limits=admission_limits()),
        registry=registry_,
        queue=queue or request_queue(redis_url=""),
        settings=RelaySettings(**values),  # type: ignore[arg-type]
    )
    task = asyncio.create_task(relay.run())
    await relay.ready.wait()
    return RunningRelay(relay=relay, layer=layer, task=task, registry=registry_)


async def _start(
    relay: AnswerRelay, turn: services.TurnStart, max_tokens: int | None = None
) -> None:
    """The relay starts the turn's run on the request channel `test.requests`."""
    await relay.start(
        message_id=turn.assistant_message.id,
        user_key="u",
        watcher="watcher-1",
        request=GenerateRequest(
            request_id=str(turn.run_id),
            reply_channel=relay.channel,
            submitted_at=0.0,
            sampling=SamplingOptions(max_tokens=max_tokens),
        ),
        request_channel="test.requests",
    )


async def _stopped(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.fixture
async def running_relay() -> AsyncIterator[RunningRelay]:
    # a heartbeat lands between almost every pair of entries
    running = await _relay_running(log=SlowLog(redis_url="", ttl_s=60), heartbeat_s=0.003)
    yield running
    await _stopped(running.task)


async def test_heartbeats_during_a_stream_never_rewrite_a_healthy_log(
    alice: User, running_relay: RunningRelay
) -> None:
    relay, layer = running_relay.relay, running_relay.layer
    turn = await sync_to_async(first_turn)(alice, "question")
    request_id = str(turn.run_id)
    await _start(relay, turn)
    send = layer.send
    await send(
        relay.channel,
        Accepted(request_id=request_id, worker_channel="w", queue_wait_ms=1).to_channel(),
    )
    for seq in range(1, 201):
        await send(
            relay.channel,
            Delta(request_id=request_id, seq=seq, text=f"w{seq} ", tokens=1).to_channel(),
        )
        if seq % 10 == 0:
            await asyncio.sleep(0.004)
    await send(relay.channel, done(request_id, 201, completion_tokens=200).to_channel())
    for _ in range(500):
        if relay.active_answers == 0:
            break
        await asyncio.sleep(0.01)

    log = relay.orphans.log
    assert isinstance(log, SlowLog)
    assert log.rewrites == 0
    entries = await log.entries_after(run_id=turn.run_id, seq=0)
    assert entries is not None
    assert len(entries) == 201
    row = await Message.objects.aget(id=turn.assistant_message.id)
    assert row.content == "".join(f"w{seq} " for seq in range(1, 201))


@pytest.mark.redis
async def test_a_stale_relays_heartbeat_cannot_touch_a_newer_runs_log(
    redis_db: aioredis.Redis,
) -> None:
    log = AnswerLog(redis_url=REDIS_URL, ttl_s=60)
    try:
        old_run, new_run = uuid.uuid4(), uuid.uuid4()
        await _logged_run(log, old_run, "old")
        await log.begin(run_id=new_run, relay_channel="relay-2", user_key="u")
        await log.append(run_id=new_run, entry=LoggedDelta(seq=1, text="new"))

        # the first run's relay, still alive somewhere, thinks its log should hold 5 entries
        broken = await log.heartbeat(relay_channel="relay-1", lengths={old_run: 5})

        assert broken == [old_run]  # only ever its own run
        assert await log.entries_after(run_id=new_run, seq=0) == [LoggedDelta(seq=1, text="new")]
        owner = await log.ownership(run_id=new_run)
        assert owner is not None
        assert owner.relay_channel == "relay-2"
    finally:
        await log.aclose()


@pytest.mark.redis
@pytest.mark.parametrize("writer_skew_s", [-6.0, 6.0])
async def test_an_owners_silence_is_measured_on_redis_clock_not_the_hosts(
    monkeypatch: pytest.MonkeyPatch, writer_skew_s: float, redis_db: aioredis.Redis
) -> None:
    """Web hosts whose clocks differ by 6 s: the host that owns a run heartbeats, another reads
    its ownership. The owner that just wrote is alive, not 6 s silent (reaped as dead), and one
    that stopped writing is seen silent, whichever clock is ahead."""
    import time

    from chatapp.answers.recovery import owner_state

    log = AnswerLog(redis_url=REDIS_URL, ttl_s=60)
    real_time = time.time
    try:
        run_id = uuid.uuid4()
        monkeypatch.setattr(time, "time", lambda: real_time() + writer_skew_s)
        await log.begin(run_id=run_id, relay_channel="relay-a", user_key="u")
        await log.heartbeat(relay_channel="relay-a", lengths={run_id: 0})
        monkeypatch.setattr(time, "time", real_time)  # the reading host

        owner = await log.ownership(run_id=run_id)
        assert owner_state(owner, silent_after_s=3.0) == "alive"
        await asyncio.sleep(0.6)
        owner = await log.ownership(run_id=run_id)
        assert owner_state(owner, silent_after_s=0.5) == "silent"
        assert owner_state(owner, silent_after_s=3.0) == "alive"
    finally:
        await log.aclose()


async def test_a_stalled_database_thread_does_not_silence_the_relays_heartbeat(
    alice: User,
) -> None:
    """Issue 31 defect 1: a row lock, an exhausted pool or a long context read holds the
    process's shared database thread (every socket's DB work runs there) for seconds. The
    relay's heartbeat must go on meanwhile, or other web processes see its live answers' owner
    silent and end them as orphans (the user sees "stopped" mid-answer)."""
    import time

    from channels.db import database_sync_to_async

    log = AnswerLog(redis_url="", ttl_s=60)
    # the reaper reads the database often
    running = await _relay_running(log=log, reap_every_s=0.2, owner_silent_after_s=1.0)
    relay, layer, task = running.relay, running.layer, running.task
    try:
        turn = await sync_to_async(first_turn)(alice, "question")
        request_id = str(turn.run_id)
        await _start(relay, turn)
        await layer.send(
            relay.channel,
            Accepted(request_id=request_id, worker_channel="w", queue_wait_ms=1).to_channel(),
        )
        await asyncio.sleep(0.3)
        stall = asyncio.create_task(database_sync_to_async(time.sleep)(2.5))  # a row lock
        await asyncio.sleep(0.1)
        silences = []
        while not stall.done():
            owner = await log.ownership(run_id=turn.run_id)
            assert owner is not None
            silences.append(owner.silent_s)
            await asyncio.sleep(0.1)
        assert len(silences) > 15
        assert max(silences) < 0.5  # heartbeats every 0.1 s all along, never reaped
    finally:
        await _stopped(task)


async def test_a_relay_stops_even_when_a_redis_call_swallows_the_cancel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """redis-py can swallow a cancel that lands inside a read (redis/redis-py#2551): the
    relay's periodic loop went on, and stopping the relay (a web process shutting down, every
    test's teardown) waited for ever. Seen as a test that hung now and then at teardown."""
    beats = 0

    async def heartbeat_swallowing_the_cancel(self: AnswerRelay) -> None:
        nonlocal beats
        beats += 1
        # what redis-py's read does when the cancel lands at the wrong moment
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.05)  # a Redis round trip

    monkeypatch.setattr(AnswerRelay, "_heartbeat", heartbeat_swallowing_the_cancel)
    running = await _relay_running(heartbeat_s=0.001)
    await until(lambda: beats >= 3)
    running.task.cancel()
    done, _ = await asyncio.wait({running.task}, timeout=3)
    assert done == {running.task}
    await _stopped(running.task)


async def test_a_run_whose_owner_record_vanished_is_not_reaped_until_it_stays_gone(
    alice: User,
) -> None:
    """Issue 31 defect 9: Redis restarted without persistence, so every run's owner record is
    gone until each live relay's next heartbeat writes it again. A reaper tick in that moment
    must not take the missing record for a dead owner and cut the live answer short; a record
    still missing after the owner's silence bound means the owner is really gone."""
    log = AnswerLog(redis_url="", ttl_s=60)
    live = await sync_to_async(first_turn)(alice, "live")
    dead = await sync_to_async(first_turn)(alice, "dead")
    await asyncio.sleep(0.25)  # both older than the reap age: candidates for the reaper
    orphans = _orphans(log, silent_after_s=0.2)

    # Redis is empty: neither run has an owner record
    assert await orphaned_runs_finish(orphans=orphans) == 0
    # the live relay's heartbeat writes its record again; the dead one never does
    await log.begin(run_id=live.run_id, relay_channel="live-relay", user_key="u")
    await asyncio.sleep(0.1)
    assert await orphaned_runs_finish(orphans=orphans) == 0  # the dead one: 0.1 s unknown
    await log.heartbeat(relay_channel="live-relay", lengths={live.run_id: 0})
    await asyncio.sleep(0.15)
    await log.heartbeat(relay_channel="live-relay", lengths={live.run_id: 0})

    assert await orphaned_runs_finish(orphans=orphans) == 1  # unknown for 0.25 s: gone
    rows = {m.id: m async for m in Message.objects.filter(role="assistant").order_by("created_at")}
    assert rows[live.assistant_message.id].status == "streaming"
    assert (rows[dead.assistant_message.id].status, rows[dead.assistant_message.id].error_code) == (
        "failed",
        "interrupted",
    )


def test_an_owner_is_dead_when_silent_or_missing_for_the_whole_bound() -> None:
    from chatapp.answers.recovery import orphan_verdict

    bound = {"silent_after_s": 5.0}
    assert orphan_verdict("alive", unknown_for_s=None, **bound) == "alive"
    assert orphan_verdict("silent", unknown_for_s=None, **bound) == "dead"
    assert orphan_verdict("unknown", unknown_for_s=None, **bound) == "wait"  # first sight
    assert orphan_verdict("unknown", unknown_for_s=4.9, **bound) == "wait"
    assert orphan_verdict("unknown", unknown_for_s=5.0, **bound) == "dead"


# ---- after a migration (issue 31 defect 8) ----------------------------------------------------


async def test_a_dead_owners_moved_run_is_cancelled_on_the_worker_now_serving_it(
    alice: User,
) -> None:
    """The run went on on a second worker (request `<run>~1`); then its web process died. The
    reaper must cancel the request that worker runs, not the first worker's id."""
    from inference.wire.protocol import CancelRequest

    log = AnswerLog(redis_url="", ttl_s=60)
    turn = await sync_to_async(first_turn)(alice, "question")
    await log.begin(run_id=turn.run_id, relay_channel="dead-relay", user_key="u")
    await log.worker_taken(
        run_id=turn.run_id, worker_channel="worker-2", request_id=f"{turn.run_id}~1"
    )
    await asyncio.sleep(0.3)
    orphans = _orphans(log, silent_after_s=0.2)
    assert await orphaned_runs_finish(orphans=orphans) == 1
    layer = orphans.layer
    assert isinstance(layer, InMemoryChannelLayer)
    cancel = await asyncio.wait_for(layer.receive("worker-2"), 1)
    assert CancelRequest.model_validate(cancel).request_id == f"{turn.run_id}~1"


async def _migrated_run(
    alice: User,
    *,
    first_token_timeout_s: float = 0.0,
    max_tokens: int | None = None,
    queue: RequestQueue | None = None,
) -> tuple[AnswerRelay, InMemoryChannelLayer, services.TurnStart, asyncio.Task[None]]:
    """A run that streamed 2 deltas on worker w1, then w1 left the registry: the relay moved it
    to the shared queue, and w2 accepted it as `<run>~1`."""
    running = await _relay_running(
        workers=("w1", "w2"), first_token_timeout_s=first_token_timeout_s, queue=queue
    )
    relay, layer, task, registry_ = running.relay, running.layer, running.task, running.registry
    turn = await sync_to_async(first_turn)(alice, "question")
    run = str(turn.run_id)
    await _start(relay, turn, max_tokens=max_tokens)
    send = layer.send
    await send(
        relay.channel, Accepted(request_id=run, worker_channel="w1", queue_wait_ms=1).to_channel()
    )
    for seq in (1, 2):
        await send(
            relay.channel, Delta(request_id=run, seq=seq, text=f"w{seq} ", tokens=5).to_channel()
        )
    await asyncio.sleep(0.1)
    await registry_.withdraw(worker_id="w1")
    for _ in range(100):
        if relay._runs[turn.run_id].migrations:
            break
        await asyncio.sleep(0.02)
    await send(
        relay.channel,
        Accepted(request_id=f"{run}~1", worker_channel="w2", queue_wait_ms=1).to_channel(),
    )
    await asyncio.sleep(0.05)
    return relay, layer, turn, task


async def _stored_end(turn: services.TurnStart) -> Message:
    for _ in range(300):
        row = await Message.objects.aget(id=turn.assistant_message.id)
        if row.status != "streaming":
            return row
        await asyncio.sleep(0.02)
    raise AssertionError("the answer never ended")


async def test_a_moved_answer_whose_new_worker_never_starts_writing_times_out(
    alice: User,
) -> None:
    """The first-token bound applies to the continuation too, not only to an answer's start:
    a second worker that accepts and never sends a token ends the answer `timeout` (its text
    kept), not after the much longer stall timeout."""
    _relay, _layer, turn, task = await _migrated_run(alice, first_token_timeout_s=0.5)
    try:
        row = await asyncio.wait_for(_stored_end(turn), 5)
        assert (row.status, row.error_code, row.content) == ("failed", "timeout", "w1 w2 ")
    finally:
        await _stopped(task)


async def test_a_moved_answers_stats_count_the_tokens_of_every_worker(alice: User) -> None:
    relay, layer, turn, task = await _migrated_run(alice)
    try:
        run = f"{turn.run_id}~1"
        await layer.send(
            relay.channel, Delta(request_id=run, seq=3, text="w3", tokens=4).to_channel()
        )
        await layer.send(
            relay.channel, done(run, 4, prompt_tokens=30, completion_tokens=4).to_channel()
        )
        row = await asyncio.wait_for(_stored_end(turn), 5)
        assert (row.status, row.content) == ("complete", "w1 w2 w3")
        assert row.completion_tokens == 14  # 10 on w1, 4 on w2
        assert row.resumed
    finally:
        await _stopped(task)


async def test_a_stalled_worker_that_comes_back_after_the_move_is_cancelled_again(
    alice: User,
) -> None:
    """The first worker was only stalled (or cut off when the cancel was sent): it goes on
    generating an answer nobody reads. Its next heartbeat gets it another cancel."""
    from inference.wire.protocol import CancelRequest

    relay, layer, turn, task = await _migrated_run(alice)
    try:
        first = await asyncio.wait_for(layer.receive("w1"), 1)  # sent when it moved
        assert CancelRequest.model_validate(first).request_id == str(turn.run_id)
        await layer.send(relay.channel, Heartbeat(request_id=str(turn.run_id)).to_channel())
        again = await asyncio.wait_for(layer.receive("w1"), 1)
        assert CancelRequest.model_validate(again).request_id == str(turn.run_id)
    finally:
        await _stopped(task)


async def test_a_moved_request_keeps_the_answers_budget_and_says_what_was_spent(
    alice: User,
) -> None:
    """Issue 31 defect 5: the relay cut `max_tokens` to what was left, so the new worker cut
    the history for a smaller answer (another, longer window). It keeps the budget and sends
    the tokens already generated; the worker keeps the first window and counts the rest."""
    from inference.wire.request_queue import moved_queue

    queue = request_queue(redis_url="")
    _relay, _layer, turn, task = await _migrated_run(alice, max_tokens=300, queue=queue)
    try:
        taken = await asyncio.wait_for(queue.take(moved_queue("test.requests"), consumer="test"), 1)
        moved = GenerateRequest.model_validate(taken.message)
        assert moved.request_id == f"{turn.run_id}~1"
        assert moved.sampling.max_tokens == 300
        assert moved.continued_tokens == 10  # 5 + 5 on the first worker
        assert moved.continue_from == "w1 w2 "
    finally:
        await _stopped(task)


@pytest.mark.redis
async def test_a_queued_request_redis_lost_is_queued_again(
    alice: User, redis_db: aioredis.Redis
) -> None:
    """Issue 31 defect 9: Redis restarted without persistence while a question waited in the
    queue (every worker busy). The request was gone, and the answer waited for nothing until it
    failed `busy`. The relay notices within a heartbeat and queues it again."""
    from inference.wire.stream_queue import RedisStreamQueue

    queue = RedisStreamQueue(redis_url=REDIS_URL)
    running = await _relay_running(queue=queue)
    relay, task = running.relay, running.task
    try:
        turn = await sync_to_async(first_turn)(alice, "question")
        await _start(relay, turn)
        assert await queue.depth("test.requests") == 1
        await redis_db.flushdb()  # the restart: nothing persisted
        await asyncio.sleep(0.5)
        taken = await asyncio.wait_for(queue.take("test.requests", consumer="w"), 2)
        assert taken.message["request_id"] == str(turn.run_id)
        assert await queue.lost("test.requests", taken.entry_id) is False
    finally:
        await _stopped(task)
        await queue.aclose()
