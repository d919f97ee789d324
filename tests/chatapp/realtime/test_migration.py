"""An answer whose worker dies mid-answer goes on on another worker, through the full ASGI app
with two scripted workers in process: the user sees one answer, no gap, no repeat, and the
stored answer is exactly that text, complete. With no other worker it fails `worker_lost`
with the text so far, as before."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User

from chatapp.conversations.models import Message
from inference.engines.scripted import ScriptedEngine
from inference.wire.transport import Transport
from inference.worker import InferenceWorker
from tests.conftest import Connect
from tests.support.sockets import first_reply, open_socket, receive_delta, receive_until
from tests.support.workers import worker_settings

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "[[slow]] " + " ".join(f"w{i}" for i in range(30))
ANSWER = f"You said: {QUESTION}"


class Workers:
    def __init__(self) -> None:
        self.engines: list[ScriptedEngine] = []
        self.workers: list[InferenceWorker] = []
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self, count: int, *, heartbeat_s: float = 0.1) -> None:
        from channels.layers import get_channel_layer

        for _ in range(count):
            engine = ScriptedEngine()
            worker = InferenceWorker(
                engine=engine,
                transport=Transport(layer=get_channel_layer()),
                settings=worker_settings(heartbeat_s=heartbeat_s),
            )
            self.engines.append(engine)
            self.workers.append(worker)
            self.tasks.append(asyncio.create_task(worker.run()))
        for worker in self.workers:
            await asyncio.wait_for(worker.ready.wait(), 5)

    async def kill(self, index: int) -> None:
        """Like kill -9: nothing more is sent, not even an error (its registry entry goes)."""
        worker = self.workers[index]

        async def say_nothing() -> None:
            return None

        worker._abort_all = say_nothing  # type: ignore[method-assign]
        for active in list(worker._active.entries()):
            active.task.cancel()
        self.tasks[index].cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.tasks[index]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


@pytest.fixture
async def workers() -> AsyncIterator[Workers]:
    made = Workers()
    yield made
    await made.stop()


async def _until_running(workers: Workers) -> int:
    for _ in range(300):
        for index, worker in enumerate(workers.workers):
            if worker.active_requests:
                return index
        await asyncio.sleep(0.01)
    raise AssertionError("no worker took the question")


async def _question_running(ws: WebsocketCommunicator, workers: Workers) -> tuple[Any, int]:
    """Sends QUESTION: its `chat.accepted` and the index of the worker that runs it."""
    accepted = await first_reply(ws, QUESTION)
    return accepted, await _until_running(workers)


async def test_an_answer_whose_worker_dies_goes_on_on_another_worker(
    connect: Connect, alice: User, workers: Workers
) -> None:
    await workers.start(2)
    ws = await open_socket(connect, alice)
    accepted, serving = await _question_running(ws, workers)
    deltas: list[dict[str, Any]] = []
    while len(deltas) < 5:
        frame = await receive_delta(ws)
        assert frame["type"] == "chat.delta", frame
        deltas.append(frame)
    await workers.kill(serving)

    frames = await receive_until(ws, "chat.done", timeout=15)
    deltas += [f for f in frames if f["type"] == "chat.delta"]
    shown = "".join(d["text"] for d in deltas)
    assert shown == ANSWER  # one answer: no gap, no repeat
    assert [d["seq"] for d in deltas] == list(range(1, len(deltas) + 1))
    assert frames[-1]["status"] == "complete"
    assert frames[-1]["resumed"] is True  # marked: the page says it went on elsewhere
    # the other worker went on from the text already streamed (its prompt ends inside the
    # open assistant turn), not from the start
    [prompt] = workers.engines[1 - serving].prompts
    assert "<|im_start|>assistant\nYou said: [[slow]] w0 w1" in prompt
    assert not prompt.endswith("<|im_start|>assistant\n")
    stored = await sync_to_async(Message.objects.get)(id=accepted["assistant_message_id"])
    assert (stored.status, stored.content, stored.resumed) == ("complete", ANSWER, True)


async def test_with_no_other_worker_it_fails_worker_lost_with_the_text_so_far(
    connect: Connect, alice: User, workers: Workers
) -> None:
    await workers.start(1)
    ws = await open_socket(connect, alice)
    accepted, _ = await _question_running(ws, workers)
    deltas = [await ws.receive_json_from(timeout=5) for _ in range(3)]
    await workers.kill(0)

    frames = await receive_until(ws, "chat.error", timeout=20)
    assert frames[-1]["code"] == "worker_lost"
    shown = "".join(d["text"] for d in deltas + frames if d["type"] == "chat.delta")
    stored = await sync_to_async(Message.objects.get)(id=accepted["assistant_message_id"])
    assert (stored.status, stored.content) == ("failed", shown)


async def test_a_draining_worker_finishes_its_answer_itself(
    connect: Connect, alice: User, workers: Workers
) -> None:
    """A SIGTERM drain is no death: the answer is not moved while its worker finishes it."""
    await workers.start(2)
    ws = await open_socket(connect, alice)
    _, serving = await _question_running(ws, workers)
    draining = asyncio.create_task(workers.workers[serving].drain(timeout_s=30))
    frames = await receive_until(ws, "chat.done", timeout=15)
    assert "".join(f["text"] for f in frames if f["type"] == "chat.delta") == ANSWER
    assert frames[-1]["resumed"] is False
    assert workers.engines[1 - serving].prompts == []  # never moved to the other worker
    await asyncio.wait_for(draining, 10)


async def test_an_answer_longer_than_the_drain_goes_on_on_another_worker(
    connect: Connect, alice: User, workers: Workers
) -> None:
    """A rolling restart: the drain deadline comes mid-answer. The answer is handed on, not
    failed `worker_lost` (it used to be, with the text so far; issue 31 defect 4)."""
    await workers.start(2)
    ws = await open_socket(connect, alice)
    accepted, serving = await _question_running(ws, workers)
    draining = asyncio.create_task(workers.workers[serving].drain(timeout_s=0.3))
    frames = await receive_until(ws, "chat.done", timeout=15)
    await asyncio.wait_for(draining, 10)

    assert "".join(f["text"] for f in frames if f["type"] == "chat.delta") == ANSWER
    assert (frames[-1]["status"], frames[-1]["resumed"]) == ("complete", True)
    assert len(workers.engines[1 - serving].prompts) == 1  # the other worker went on
    stored = await sync_to_async(Message.objects.get)(id=accepted["assistant_message_id"])
    assert (stored.status, stored.content) == ("complete", ANSWER)


async def test_an_emptied_registry_moves_no_answer(
    connect: Connect, alice: User, workers: Workers
) -> None:
    """Redis restarted without persistence: the registry is empty until the workers announce
    themselves again (their next heartbeat). A live worker that is streaming is not gone: its
    answer must not be moved (issue 31 defect 9: every answer was, or failed worker_lost)."""
    from inference.wire.registry import worker_registry

    await workers.start(2, heartbeat_s=2.0)
    ws = await open_socket(connect, alice)
    accepted, serving = await _question_running(ws, workers)
    deltas = [await receive_delta(ws) for _ in range(3)]
    registry = worker_registry(redis_url="")
    for worker in workers.workers:  # what a restarted Redis holds: no worker at all
        await registry.withdraw(worker_id=str(worker.channel))

    frames = await receive_until(ws, "chat.done", timeout=15)
    shown = "".join(f["text"] for f in deltas + frames if f["type"] == "chat.delta")
    assert shown == ANSWER
    assert frames[-1]["resumed"] is False  # not moved
    assert workers.engines[1 - serving].prompts == []
    stored = await sync_to_async(Message.objects.get)(id=accepted["assistant_message_id"])
    assert (stored.status, stored.content) == ("complete", ANSWER)
