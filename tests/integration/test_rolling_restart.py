"""A rolling restart of the workers under load loses nothing and keeps no one waiting.

1. Two scripted workers on the request queue, questions sent at 5 a second over 10 sockets (some
answers take about a second, so a stop lands mid-answer). Worker A gets SIGTERM: it stops
taking, hands back what it took, finishes its running answers and exits; a new A starts; then
B gets SIGTERM the same way. Every answer must complete with the right text, none may wait more
than 10 s from send to its end, and none may be refused `busy` or fail `no_worker`. Real
processes: web (daphne), workers, Redis, PostgreSQL (tests/integration/stack.py).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
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
    workers_become,
)

pytestmark = pytest.mark.redis

RATE_PER_S = 5
DURATION_S = 16
SOCKETS = 10
LONGEST_WAIT_S = 10.0


@pytest.fixture(scope="module")
def two_worker_stack(workdir: Path, databases: Databases) -> Iterator[Stack]:
    env = {"INFERENCE_MAX_ACTIVE": "4", "INFERENCE_DRAIN_S": "15"}
    with running_stack("rolling", workdir, databases, webs=1, workers=2, env=env) as started:
        yield started


def _stop_gracefully(proc: subprocess.Popen[str], timeout_s: float) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=timeout_s)


@pytest.mark.asyncio(loop_scope="session")
async def test_a_rolling_restart_under_load_keeps_every_answer_and_no_one_waits(
    two_worker_stack: Stack,
) -> None:
    stack = two_worker_stack
    await workers_become(stack, lambda w: len(w) == 2, "two live workers", 10)
    host = stack.hosts[0]
    session = await session_for(host)
    chats = [await Chat.open(host, session) for _ in range(SOCKETS)]
    locks = [asyncio.Lock() for _ in chats]  # one answer at a time per socket
    results: list[tuple[str, float, dict[str, object], str]] = []

    async def ask(n: int) -> None:
        index = n % SOCKETS
        # every fourth one streams ~1 s (20 words at 50 ms), so stops land mid-answer
        text = f"[[slow]] {'w ' * 16}{n}" if n % 4 == 0 else f"rolling question {n}"
        async with locks[index]:
            sent = time.monotonic()
            chat = chats[index]
            frame = send_frame(text)
            await chat.send(frame)
            reply = await chat.reply(frame["id"], timeout=30)
            if reply["type"] != "chat.accepted":
                results.append((text, time.monotonic() - sent, reply, ""))
                return
            answer = await chat.follow(Answer(reply["assistant_message_id"]), timeout=30)
            results.append((text, time.monotonic() - sent, answer.ended(), answer.shown))

    async def restarts() -> list[int]:
        await asyncio.sleep(3)
        first = stack.worker
        assert first is not None
        codes = [await asyncio.to_thread(_stop_gracefully, first, 30)]
        await asyncio.to_thread(stack.start_worker)  # the new A
        await asyncio.sleep(2)
        second = stack.more_workers[0]
        codes.append(await asyncio.to_thread(_stop_gracefully, second, 30))
        return codes

    restarting = asyncio.create_task(restarts())
    asks = []
    for n in range(RATE_PER_S * DURATION_S):
        asks.append(asyncio.create_task(ask(n)))
        await asyncio.sleep(1 / RATE_PER_S)
    await asyncio.wait_for(asyncio.gather(*asks), 60)
    exit_codes = await asyncio.wait_for(restarting, 60)
    for chat in chats:
        await chat.close()

    assert exit_codes == [0, 0]  # both drained and exited cleanly
    assert len(results) == RATE_PER_S * DURATION_S
    refused = [(text, end) for text, _, end, _ in results if end.get("type") != "chat.done"]
    assert not refused, refused[:5]
    wrong = [(text, shown) for text, _, _, shown in results if shown != f"You said: {text}"]
    assert not wrong, wrong[:5]
    assert all(end.get("status") == "complete" for _, _, end, _ in results)
    waits = sorted(wait for _, wait, _, _ in results)
    print(
        f"\n[rolling] {len(results)} answers; send->end median {waits[len(waits) // 2]:.2f} s, "
        f"max {waits[-1]:.2f} s"
    )
    assert waits[-1] <= LONGEST_WAIT_S
    drained = "".join(stack.output.get("worker", []))
    assert "Stopping: finishing running answers" in drained


@pytest.fixture(scope="module")
def short_drain_stack(workdir: Path, databases: Databases) -> Iterator[Stack]:
    env = {"INFERENCE_DRAIN_S": "1.5"}
    with running_stack("short-drain", workdir, databases, webs=1, workers=1, env=env) as started:
        yield started


@pytest.mark.asyncio(loop_scope="session")
async def test_answers_longer_than_the_drain_go_on_on_the_other_worker(
    short_drain_stack: Stack,
) -> None:
    stack = short_drain_stack
    host = stack.hosts[0]
    session = await session_for(host)
    chats = [await Chat.open(host, session) for _ in range(3)]
    asked = [slow_question(150 + n) for n in range(3)]  # ~8 s each at 50 ms a word
    answers = []
    for chat, (question, _) in zip(chats, asked, strict=True):
        accepted = await chat.accepted(send_frame(question))
        answers.append(Answer(accepted["assistant_message_id"]))
    for chat, answer in zip(chats, answers, strict=True):
        await chat.follow(answer, timeout=10, until_deltas=3)
    await asyncio.to_thread(stack.add_worker)  # B, idle
    await workers_become(stack, lambda w: len(w) == 2, "two live workers", 10)
    first = stack.worker
    assert first is not None
    stopping = asyncio.create_task(asyncio.to_thread(_stop_gracefully, first, 30))

    for chat, answer, (_, expected) in zip(chats, answers, asked, strict=True):
        await chat.follow(answer, timeout=30)
        assert answer.done_complete() == expected
        assert answer.contiguous  # no gap, no repeat
        assert answer.ended()["resumed"] is True  # B finished it
        assert stored(stack, answer.message_id)[0::2] == ("complete", expected)
        await chat.close()
    assert await stopping == 0
