"""Prefix caches stay hot across workers, through the full ASGI app with two scripted workers
in process: a conversation's turns stay on the worker that served its first one (its prefix
cache holds the history), a turn whose worker is full or gone goes to the other worker
without waiting long, publishing a template warms every live worker, and a worker that starts
warms the published templates before it takes chat."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User

from chatapp.prompts import services
from chatapp.prompts.prefixes import serve_prefix_lists
from inference.engines.scripted import ScriptedEngine
from inference.start_warmup import PLAIN_QUESTION
from inference.wire.protocol import REQUEST_CHANNEL, ChatTurn, GenerateRequest
from inference.wire.registry import worker_registry
from inference.wire.request_queue import worker_queue
from inference.wire.transport import Transport
from inference.worker import InferenceWorker
from tests.chatapp.prompts.factories import SYSTEM, template_create
from tests.conftest import Connect
from tests.support.embedded import embedded_queue
from tests.support.sockets import answer_text, ask, open_socket
from tests.support.workers import worker_settings

pytestmark = pytest.mark.django_db(transaction=True)


class Pair:
    def __init__(self) -> None:
        self.engines = [ScriptedEngine(), ScriptedEngine()]
        self.workers: list[InferenceWorker] = []
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        from channels.layers import get_channel_layer

        for engine in self.engines:
            worker = InferenceWorker(
                engine=engine,
                transport=Transport(layer=get_channel_layer()),
                settings=worker_settings(max_active=1, heartbeat_s=0.05),
            )
            self.workers.append(worker)
            self.tasks.append(asyncio.create_task(worker.run()))
        for worker in self.workers:
            await asyncio.wait_for(worker.ready.wait(), 5)
        await asyncio.sleep(0.2)  # both announced their free slots

    def served(self, text: str) -> list[int]:
        """Which engines were given a prompt ending with `text`."""
        return [i for i, e in enumerate(self.engines) if any(text in p for p in e.prompts)]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


@pytest.fixture
async def pair() -> AsyncIterator[Pair]:
    started = Pair()
    await started.start()
    yield started
    await started.stop()


async def _ask(ws: WebsocketCommunicator, text: str, conversation_id: str | None) -> Any:
    frames = await ask(ws, text, conversation_id=conversation_id)
    assert answer_text(frames) == f"You said: {text}"
    return frames[0]


async def _conversation_started(
    pair: Pair, ws: WebsocketCommunicator, text: str
) -> tuple[str, int]:
    """A new conversation asking `text`: its id and the engine that answered (its home)."""
    accepted = await _ask(ws, text, None)
    [home] = pair.served(text)
    return str(accepted["conversation_id"]), home


async def test_every_turn_of_a_conversation_goes_to_the_worker_of_its_first(
    connect: Connect, alice: User, pair: Pair
) -> None:
    conversations = []
    for n in range(4):  # four conversations: the first turns spread over both workers
        ws = await open_socket(connect, alice)
        accepted = await _ask(ws, f"first question {n}", None)
        conversations.append((ws, str(accepted["conversation_id"])))
        await asyncio.sleep(0.15)  # the worker announces its slot free again
    for turn in range(3):
        for n in (0, 2, 3, 1):  # not the first turns' order: a round robin would not match
            ws, conversation_id = conversations[n]
            await _ask(ws, f"follow-up {turn} of {n}", conversation_id)
            await asyncio.sleep(0.15)
    for n in range(4):
        first = pair.served(f"first question {n}")
        assert len(first) == 1
        for turn in range(3):
            assert pair.served(f"follow-up {turn} of {n}") == first, (n, turn)


async def test_a_turn_whose_worker_is_busy_goes_to_the_other_at_once(
    connect: Connect, alice: User, pair: Pair
) -> None:
    ws = await open_socket(connect, alice)
    conversation_id, home = await _conversation_started(pair, ws, "where is my parcel")
    # the conversation's worker (one slot) gets busy with a long answer of someone else
    long_answer = await _occupy(pair.workers[home])
    await asyncio.sleep(0.2)  # it announces no free slot
    started = time.monotonic()
    await _ask(ws, "and when will it come", conversation_id)
    assert time.monotonic() - started < 0.9  # not parked behind the long answer
    assert pair.served("and when will it come") == [1 - home]
    await asyncio.wait_for(long_answer, 30)


async def _occupy(worker: InferenceWorker) -> asyncio.Task[None]:
    """A slow answer (~2 s) on `worker` alone, read to its end by the returned task."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    reply = await layer.new_channel()
    assert worker.channel is not None
    request = GenerateRequest(
        request_id=str(uuid.uuid4()),
        reply_channel=reply,
        messages=[ChatTurn(role="user", content="[[slow]] " + "w " * 40)],
        submitted_at=time.time(),
    )
    await embedded_queue().put(worker_queue(REQUEST_CHANNEL, worker.channel), request.to_channel())

    async def read_to_end() -> None:
        while (await layer.receive(reply))["type"] not in ("inference.done", "inference.error"):
            pass

    reading = asyncio.create_task(read_to_end())
    for _ in range(100):
        if worker.active_requests:
            return reading
        await asyncio.sleep(0.01)
    raise AssertionError("the worker never took the long request")


async def test_a_turn_whose_worker_vanished_is_answered_by_the_other(
    connect: Connect, alice: User, pair: Pair
) -> None:
    ws = await open_socket(connect, alice)
    conversation_id, home = await _conversation_started(pair, ws, "reset my password")
    # its worker stops taking anything but still looks alive with a free slot (frozen)
    pair.tasks[home].cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await pair.tasks[home]
    registry = worker_registry(redis_url="")
    channel = pair.workers[home].channel
    assert channel is not None
    await registry.announce(worker_id=channel, capacity=17, ttl_s=30, free=1)
    try:
        started = time.monotonic()
        await _ask(ws, "it still does not work", conversation_id)
        waited = time.monotonic() - started
    finally:
        await registry.withdraw(worker_id=channel)
    assert pair.served("it still does not work") == [1 - home]
    assert waited < 3  # moved to the shared queue after CHAT_AFFINITY_WAIT_S (1 s)


async def test_publishing_a_template_warms_every_live_worker(alice: User, pair: Pair) -> None:
    template = await sync_to_async(template_create)()
    version = await sync_to_async(services.template_version_warm)(
        version_id=(await sync_to_async(services.template_publish)(template=template, user=None)).pk
    )
    assert version.warmed_at is not None
    assert version.warm_error == ""
    for engine in pair.engines:  # each engine's cache got the prefix itself
        assert any(
            p.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n") for p in engine.prompts
        )


async def test_a_starting_worker_warms_the_plain_chat_and_the_templates_before_it_takes_chat(
    alice: User,
) -> None:
    from channels.layers import get_channel_layer

    await sync_to_async(services.template_publish)(
        template=await sync_to_async(template_create)(), user=None
    )
    serving = asyncio.create_task(serve_prefix_lists())
    engine = ScriptedEngine()
    worker = InferenceWorker(
        engine=engine,
        transport=Transport(layer=get_channel_layer()),
        settings=worker_settings(start_warmup_s=10.0),
    )
    registry = worker_registry(redis_url="")
    task = asyncio.create_task(worker.run())
    try:
        for _ in range(200):
            if len(engine.prompts) >= 2:
                break
            await asyncio.sleep(0.01)
        # first the plain chat (the first user is not the engine's first request), then the
        # template's prefix; and only then does admission count the worker
        assert not worker.ready.is_set() or len(engine.prompts) >= 2
        plain, template = engine.prompts[:2]
        assert plain.startswith("<|im_start|>user\n")
        assert PLAIN_QUESTION in plain
        assert template.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n")
        await asyncio.wait_for(worker.ready.wait(), 5)
        await asyncio.sleep(0.3)
        assert worker.channel in await registry.live_workers()
    finally:
        task.cancel()
        serving.cancel()
        await asyncio.gather(task, serving, return_exceptions=True)
