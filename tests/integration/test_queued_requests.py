"""A request queued behind a long answer waits for its worker instead of vanishing.

One scripted worker with one slot: answer A streams for ~75 s, question B is sent a second
later and waits in `inference.requests`. Both layers used to drop messages older than 60 s
(channels_redis's default expiry, the in-memory layer's too), so B was dropped while the web
side still waited for it, and ended `busy` at the queue timeout with nothing generated. Real
processes: web (daphne), worker, Redis, PostgreSQL (tests/integration/stack.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.stack import (
    Answer,
    Chat,
    Databases,
    Stack,
    running_stack,
    send_frame,
    session_for,
    slow_question,
    stored,
)

pytestmark = pytest.mark.redis


@pytest.fixture(scope="module")
def one_slot_stack(workdir: Path, databases: Databases) -> Iterator[Stack]:
    env = {
        "INFERENCE_MAX_ACTIVE": "1",
        "INFERENCE_MAX_QUEUE": "2",
        "CHAT_MAX_TOKENS": "1600",
        "CHAT_ACCEPT_TIMEOUT_S": "5",
        "CHAT_QUEUE_TIMEOUT_S": "120",
    }
    with running_stack("one-slot", workdir, databases, webs=1, env=env) as started:
        yield started


@pytest.mark.asyncio(loop_scope="session")
async def test_a_request_queued_behind_a_75_second_answer_is_answered(
    one_slot_stack: Stack,
) -> None:
    stack = one_slot_stack
    host = stack.hosts[0]
    session = await session_for(host)
    long_question, long_answer = slow_question(1480)  # ~75 s at 50 ms a word
    first, second = await Chat.open(host, session), await Chat.open(host, session)
    accepted = await first.accepted(send_frame(long_question))
    long_run = asyncio.create_task(
        first.follow(Answer(accepted["assistant_message_id"]), timeout=150)
    )
    await asyncio.sleep(1)
    queued_at = time.monotonic()
    waiting = await second.accepted(send_frame("[[slow]] am I still in line"))
    answer = await second.follow(Answer(waiting["assistant_message_id"]), timeout=150)
    waited = time.monotonic() - queued_at

    assert answer.done_complete() == "You said: [[slow]] am I still in line"
    assert waited > 60  # it really waited past the old expiry
    assert stored(stack, waiting["assistant_message_id"])[0] == "complete"
    assert (await long_run).done_complete() == long_answer
    await first.close()
    await second.close()
