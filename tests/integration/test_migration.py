"""kill -9 a worker mid-answer with a second worker up: the answer goes on on the second one.

Real processes (tests/integration/stack.py): a web process, Redis, PostgreSQL, and two workers.
The answer starts on worker A; worker B starts; A is killed with SIGKILL. The user must see one
answer, with no gap and no repeat, complete and marked resumed, and the stored answer must be
exactly what the user saw. Twice: with scripted workers (the scripted engine goes on after the
words already said when its prompt ends in the open assistant turn, so the expected text is
exact), and with real vLLM workers on the tiny model. The second needed the orphan reaper
(inference/engines/orphan_reaper.py): before it, the killed worker's vLLM engine core lived on
and went on generating the answer, starving the surviving worker on 2 cores.

A JSON-schema answer is the exception: killed mid-answer, it fails (503 `worker_lost` on the
API) and the other worker never starts it (a second document would follow the first half).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.processes import REPO_ROOT
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


_MAKE_KEY = """
from django.contrib.auth.models import User
from chatapp.apikeys.services import api_key_create
user, _ = User.objects.get_or_create(username="json-client")
print(api_key_create(user=user, name="json", rate_limit=1000, max_concurrent=8).secret)
"""

TICKET = {
    "type": "json_schema",
    "json_schema": {
        "name": "ticket",
        "schema": {"type": "object", "properties": {"id": {"type": "string"}}},
    },
}


@pytest.mark.asyncio(loop_scope="session")
async def test_a_json_answer_whose_worker_is_killed_fails_clearly_instead_of_moving(
    migration_stack: Stack,
) -> None:
    """Issue 31 defect 6, on real processes: a structured answer moved to another worker would
    get a second JSON document after the half-written one, returned as complete. It fails with
    503 `worker_lost` and a Retry-After, and the other worker never starts it."""
    stack = migration_stack
    if stack.worker is None or stack.worker.poll() is not None:
        await asyncio.to_thread(stack.start_worker)
    if not any(proc.poll() is None for proc in stack.more_workers):
        await asyncio.to_thread(stack.add_worker)
    await workers_become(stack, lambda w: len(w) == 2, "two live workers", 10)
    workers = [p for p in (stack.worker, *stack.more_workers) if p is not None and p.poll() is None]
    accepted = "chat:worker_requests_accepted_total"
    before = {proc.pid: stack.worker_metric(proc, accepted) for proc in workers}
    made = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "manage.py", "shell", "-c", _MAKE_KEY],
        env=stack.env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    headers = {"Authorization": f"Bearer {made.stdout.strip().splitlines()[-1]}"}
    question, _ = slow_question(200)  # ~10 s of answer
    async with httpx.AsyncClient(base_url=f"http://{stack.hosts[0]}", timeout=60) as http:
        model = (await http.get("/v1/models", headers=headers)).json()["data"][0]["id"]
        body = {
            "model": model,
            "messages": [{"role": "user", "content": question}],
            "response_format": TICKET,
        }
        asked = asyncio.create_task(http.post("/v1/chat/completions", json=body, headers=headers))

        def serving() -> subprocess.Popen[str] | None:
            started = [p for p in workers if stack.worker_metric(p, accepted) > before[p.pid]]
            return started[0] if started else None

        found = None
        for _ in range(100):
            found = await asyncio.to_thread(serving)
            if found is not None:
                break
            await asyncio.sleep(0.05)
        assert found is not None, "no worker started the answer"
        await asyncio.sleep(1.0)  # part of the answer is written
        found.kill()  # SIGKILL mid-answer; the other worker is up
        response = await asyncio.wait_for(asked, 40)

    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "worker_lost"
    assert int(response.headers["Retry-After"]) >= 1
    (other,) = [p for p in workers if p is not found]
    assert stack.worker_metric(other, accepted) == before[other.pid]  # never moved there


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
