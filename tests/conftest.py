"""Shared fixtures: a scripted-engine worker on the in-memory channel layer, logged-in sockets."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from chatapp.answers.runtime import answer_runtime_close
from chatapp.asgi import application
from inference.engines.scripted import ScriptedEngine
from inference.wire.transport import Transport
from inference.worker import InferenceWorker
from tests.support.embedded import empty_embedded_redis
from tests.support.workers import worker_settings


@pytest.fixture(autouse=True)
def empty_embedded_default() -> None:
    """Each test starts with the embedded default's Redis empty."""
    empty_embedded_redis()


class RunningWorker:
    def __init__(
        self, worker: InferenceWorker, engine: ScriptedEngine, task: asyncio.Task[None]
    ) -> None:
        self.worker = worker
        self.engine = engine
        self.task = task

    def vanish(self) -> None:
        """Stop like a killed process: no error, no done, no heartbeat, nothing sent."""

        async def say_nothing() -> None:
            return None

        self.worker._abort_all = say_nothing  # type: ignore[method-assign]
        self.task.cancel()
        for task in asyncio.all_tasks():
            if task.get_name().startswith("generate-"):  # the worker's request tasks
                task.cancel()


@pytest.fixture
async def scripted_worker() -> AsyncIterator[RunningWorker]:
    engine = ScriptedEngine()
    worker = InferenceWorker(
        engine=engine,
        transport=Transport(layer=get_channel_layer()),
        settings=worker_settings(),
    )
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(worker.ready.wait(), 5)
    yield RunningWorker(worker, engine, task)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _session_cookie(user: User) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


Connect = Callable[..., Coroutine[Any, Any, WebsocketCommunicator]]


@pytest.fixture
async def connect() -> AsyncIterator[Connect]:
    """Open sockets through the full ASGI app (origin check, session auth, routing)."""
    opened: list[WebsocketCommunicator] = []

    async def _connect(user: User | None, *, origin: bytes = b"http://localhost") -> Any:
        headers = [(b"origin", origin)]
        if user is not None:
            cookie = await sync_to_async(_session_cookie)(user)
            headers.append((b"cookie", f"sessionid={cookie}".encode()))
        communicator = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
        opened.append(communicator)
        return communicator

    yield _connect
    for communicator in opened:
        with contextlib.suppress(Exception):
            await communicator.disconnect()
    await answer_runtime_close()  # the relay belongs to this test's event loop
