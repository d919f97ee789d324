"""kill -9 a worker mid-answer with a second worker up: the answer goes on on the second one.

Real processes (tests/integration/stack.py): a web process, Redis, PostgreSQL, and two workers.
The answer starts on worker A; worker B starts; A is killed with SIGKILL. The user must see one
answer, with no gap and no repeat, complete and marked resumed, and the stored answer must be
exactly what the user saw. Twice: with scripted workers (the scripted engine goes on after the
words already said when its prompt ends in the open assistant turn, so the expected text is
exact), and with real vLLM workers on the tiny model. The second needed the orphan reaper
(inference/engines/orphan_reaper.py): before it, the killed worker's vLLM engine core lived on
and went on generating the answer, starving the surviving worker on 2 cores.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.stack import (
    Answer,
    Chat,
    Databases,
    Stack,
    db_value,
    running_stack,
    send_frame,
    session_for,
    slow_question,
    stored,
    workers_become,
)

pytestmark = pytest.mark.redis


@pytest.fixture(scope="module")
def migration_stack(workdir: Path, databases: Databases) -> Iterator[Stack]:
    with running_stack("migration", workdir, databases, webs=1) as started:
        yield started


@pytest.mark.asyncio(loop_scope="session")
async def test_a_worker_killed_mid_answer_hands_the_answer_to_the_other_worker(
    migration_stack: Stack,
) -> None:
    stack = migration_stack
    host = stack.hosts[0]
    chat = await Chat.open(host, await session_for(host))
    question, expected = slow_question(300)  # ~15 s at 50 ms a word
    accepted = await chat.accepted(send_frame(question))
    answer = Answer(accepted["assistant_message_id"])
    await chat.follow(answer, timeout=10, until_deltas=5)
    await asyncio.to_thread(stack.add_worker)  # B, while A is answering
    await workers_become(stack, lambda w: len(w) == 2, "two live workers", 10)
    await chat.follow(answer, timeout=10, until_deltas=len(answer.deltas) + 3)
    stack.kill_worker()  # A: SIGKILL, mid-answer

    await chat.follow(answer, timeout=60)
    assert answer.done_complete() == expected  # one answer: no gap, no repeat
    assert answer.contiguous
    assert answer.snapshot is None
    assert stored(stack, answer.message_id)[0::2] == ("complete", expected)
    assert answer.ended()["resumed"] is True
    assert (
        db_value(
            stack, "SELECT resumed FROM conversations_message WHERE id = %s", answer.message_id
        )
        is True
    )
    await chat.close()


@pytest.fixture(scope="module")
def tiny_stack(workdir: Path, databases: Databases, tiny_model: Path) -> Iterator[Stack]:
    env = {
        "INFERENCE_ENGINE": "vllm",
        "MODEL": str(tiny_model),
        "VLLM_CPU_KVCACHE_SPACE": "1",
        # one answer streams about 100 tokens a second here (vLLM's step on 2 cores): long
        # enough that A is killed mid-answer, short enough that B finishes it in seconds
        "CHAT_MAX_TOKENS": "1500",
        "VLLM_CACHE_ROOT": str(tiny_model.parent.parent / "cache" / "vllm"),
    }
    with running_stack(
        "migration-tiny",
        workdir,
        databases,
        webs=1,
        workers=2,
        env=env,
        worker_ready_s=300,
        workers_one_by_one=True,
    ) as started:
        yield started


def serving_worker(stack: Stack) -> subprocess.Popen[str]:
    """The worker process generating the one answer: the one that accepted a request."""
    workers = [proc for proc in (stack.worker, *stack.more_workers) if proc is not None]
    serving = [
        proc
        for proc in workers
        if stack.worker_metric(proc, "chat:worker_requests_accepted_total") >= 1
    ]
    assert len(serving) == 1, serving
    return serving[0]


@pytest.mark.vllm
@pytest.mark.asyncio(loop_scope="session")
async def test_a_vllm_worker_killed_mid_answer_hands_it_to_the_other_vllm_worker(
    tiny_stack: Stack,
) -> None:
    stack = tiny_stack
    host = stack.hosts[0]
    chat = await Chat.open(host, await session_for(host))
    accepted = await chat.accepted(send_frame(f"Tell me a very long story {uuid.uuid4().hex}."))
    answer = Answer(accepted["assistant_message_id"])
    await chat.follow(answer, timeout=60, until_deltas=3)
    serving = await asyncio.to_thread(serving_worker, stack)
    assert answer.end is None, "the answer ended before its worker could be killed"
    shown_at_kill, killed_at = len(answer.shown), time.monotonic()
    serving.kill()  # SIGKILL, mid-answer; the other worker is up
    serving.wait(timeout=10)

    await chat.follow(answer, timeout=180)
    end = answer.ended()
    print(
        f"killed after {shown_at_kill} characters; the other worker wrote "
        f"{len(answer.shown) - shown_at_kill} more in {time.monotonic() - killed_at:.1f} s"
    )
    assert (end["type"], end["status"], end["resumed"]) == ("chat.done", "complete", True)
    assert answer.contiguous  # no gap, no repeat
    assert answer.snapshot is None
    assert stored(stack, answer.message_id)[0::2] == ("complete", answer.shown)
    await chat.close()
