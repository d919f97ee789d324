"""The embedded answer log (one process, no Redis): what it keeps, and what keeping it costs."""

from __future__ import annotations

import asyncio
import time
import uuid

from chatapp.answers.entries import LoggedDelta
from chatapp.answers.log import LocalAnswerLog


async def test_an_append_costs_the_same_however_many_recent_answers_are_kept() -> None:
    """Issue 31 defect 12: every read or append looked at every kept log to expire the old
    ones, so each delta cost grew with the answers of the last `ttl_s` (about a tenth of a core
    at 4 answers a second, more than half at 10)."""
    log = LocalAnswerLog(ttl_s=600)
    for _ in range(50_000):  # the answers of a busy few hours, all within the ttl
        await log.begin(run_id=uuid.uuid4(), relay_channel="relay", user_key="u")
    run_id = uuid.uuid4()
    await log.begin(run_id=run_id, relay_channel="relay", user_key="u")

    started = time.perf_counter()
    for seq in range(1, 2_001):
        await log.append(run_id=run_id, entry=LoggedDelta(seq=seq, text="w "))
    elapsed = time.perf_counter() - started

    assert elapsed < 1.0, f"2,000 deltas took {elapsed:.2f} s"  # ~0.01 s; a scan each: ~6 s
    assert len(await log.entries_after(run_id=run_id, seq=0) or []) == 2_000


async def test_a_log_expires_ttl_after_its_last_write_and_others_stay() -> None:
    log = LocalAnswerLog(ttl_s=0.2)
    old, kept = uuid.uuid4(), uuid.uuid4()
    await log.begin(run_id=old, relay_channel="relay", user_key="u")
    await log.begin(run_id=kept, relay_channel="relay", user_key="u")
    for seq in range(1, 4):
        await asyncio.sleep(0.1)
        await log.append(run_id=kept, entry=LoggedDelta(seq=seq, text="w "))

    assert await log.ownership(run_id=old) is None  # 0.3 s without a write
    assert await log.ownership(run_id=kept) is not None
    assert await log.heartbeat(relay_channel="relay", lengths={kept: 3}) == []
    await asyncio.sleep(0.25)
    assert await log.entries_after(run_id=kept, seq=0) is None
