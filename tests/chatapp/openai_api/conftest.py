"""The API through the full ASGI app (httpx or the official openai client, in process), with
a scripted worker on the in-memory channel layer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
import openai
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from chatapp.answers.runtime import answer_runtime_close
from chatapp.apikeys import services
from chatapp.apikeys.models import ApiKey
from chatapp.asgi import application
from inference.worker import InferenceWorker


@dataclass(frozen=True)
class Key:
    key: ApiKey
    secret: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secret}"}


def key_create(username: str = "api-user", **fields: Any) -> Key:
    user, _ = User.objects.get_or_create(username=username)
    issued = services.api_key_create(user=user, name=f"{username} key", **fields)
    return Key(issued.key, issued.secret)


@pytest.fixture
async def api_key() -> Key:
    return await sync_to_async(key_create)()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client
    await answer_runtime_close()  # the relay belongs to this test's event loop


def openai_client(secret: str) -> openai.AsyncOpenAI:
    """The official client, talking to the app in process (max_retries=0: see every error)."""
    return openai.AsyncOpenAI(
        api_key=secret,
        base_url="http://testserver/v1",
        http_client=httpx2.AsyncClient(transport=httpx2.ASGITransport(app=application)),
        max_retries=0,
    )


@pytest.fixture
async def client(http: httpx.AsyncClient, api_key: Key) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai_client(api_key.secret) as made:
        yield made


def chat(text: str, **fields: Any) -> dict[str, Any]:
    from django.conf import settings

    return {
        "model": settings.CHAT_API_MODEL,
        "messages": [{"role": "user", "content": text}],
        **fields,
    }


def sse_events(body: str) -> list[Any]:
    """`data:` payloads of a server-sent-event body, JSON-decoded ("[DONE]" kept as is)."""
    import json

    events: list[Any] = []
    for block in body.split("\n\n"):
        if not block.strip() or block.startswith(":"):  # a comment: the keep-alives
            continue
        assert block.startswith("data: "), block
        data = block.removeprefix("data: ")
        events.append(data if data == "[DONE]" else json.loads(data))
    return events


def completions_scope(headers: dict[str, str]) -> dict[str, Any]:
    """The ASGI scope daphne gives a POST /v1/chat/completions with these headers (for tests
    that drive the app directly, to disconnect mid-answer)."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"testserver"),
            (b"content-type", b"application/json"),
            *((name.lower().encode(), value.encode()) for name, value in headers.items()),
        ],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }


async def slow_answer_running(
    http: httpx.AsyncClient, headers: dict[str, str], worker: InferenceWorker, words: int
) -> asyncio.Task[httpx.Response]:
    """Asks for a slow answer of `words` words (the scripted engine's `[[slow]]`: 50 ms a
    word) and returns once `worker` runs it; the response is the task's."""
    question = "[[slow]] " + " ".join(["word"] * words)
    answer = asyncio.create_task(
        http.post("/v1/chat/completions", json=chat(question), headers=headers)
    )
    for _ in range(100):
        if worker.active_requests == 1:
            break
        await asyncio.sleep(0.02)
    return answer


class LeavingClient:
    """POST /v1/chat/completions driven as daphne drives the app (to disconnect mid-answer,
    which httpx cannot): `leave()` is the client going away; the app's task is `app`."""

    def __init__(self, headers: dict[str, str], body: dict[str, Any]) -> None:
        self.sent: list[dict[str, object]] = []
        self.first_chunk = asyncio.Event()  # the first event, after the keep-alive comment
        self._gone = asyncio.Event()
        self._requests = [
            {"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}
        ]
        self.app = asyncio.create_task(
            application(completions_scope(headers), self._receive, self._send)
        )

    async def _receive(self) -> dict[str, object]:
        if self._requests:
            return self._requests.pop()
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict[str, object]) -> None:
        self.sent.append(message)
        body = message.get("body")
        if message["type"] == "http.response.body" and isinstance(body, bytes) and b"data:" in body:
            self.first_chunk.set()

    async def leave(self) -> None:
        """The client goes away; returns when the app has finished the request."""
        self._gone.set()
        await asyncio.wait_for(self.app, 10)
