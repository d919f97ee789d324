"""An SDK retry with one `Idempotency-Key` runs once, and what the API returns is what was stored,
even when the last entries on their way to the request are lost. Full ASGI app, scripted worker."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from chatapp.conversations.models import Conversation, Message
from tests.chatapp.openai_api.conftest import Key, LeavingClient, chat
from tests.conftest import RunningWorker
from tests.support.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "[[slow]] " + " ".join(f"w{i}" for i in range(12))


async def test_a_retry_with_the_same_idempotency_key_runs_once(
    http: httpx.AsyncClient, api_key: Key, scripted_worker: RunningWorker
) -> None:
    headers = {**api_key.headers, "Idempotency-Key": "order-42-attempt"}
    first = await http.post("/v1/chat/completions", json=chat(QUESTION), headers=headers)
    retry = await http.post("/v1/chat/completions", json=chat(QUESTION), headers=headers)
    streamed = await http.post(
        "/v1/chat/completions", json=chat(QUESTION, stream=True), headers=headers
    )

    assert first.status_code == retry.status_code == streamed.status_code == 200
    assert retry.json()["id"] == first.json()["id"]
    assert retry.json()["choices"][0]["message"]["content"] == f"You said: {QUESTION}"
    assert f"chatcmpl-{first.json()['id'].removeprefix('chatcmpl-')}" in streamed.text
    assert len(scripted_worker.engine.prompts) == 1
    conversations = await sync_to_async(Conversation.objects.filter(owner=api_key.key.user).count)()
    assert conversations == 1


async def test_an_idempotency_key_reused_for_another_question_is_refused(
    http: httpx.AsyncClient, api_key: Key, scripted_worker: RunningWorker
) -> None:
    headers = {**api_key.headers, "Idempotency-Key": "k1"}
    assert (await http.post("/v1/chat/completions", json=chat("one"), headers=headers)).is_success
    other = await http.post("/v1/chat/completions", json=chat("two"), headers=headers)
    bad = await http.post(
        "/v1/chat/completions",
        json=chat("three"),
        headers={**api_key.headers, "Idempotency-Key": "x" * 300},
    )

    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert bad.status_code == 400
    assert bad.json()["error"]["param"] == "Idempotency-Key"
    assert len(scripted_worker.engine.prompts) == 1


class _LastDeltaLost:
    """Drops, on its way to each watcher, the last delta before the end (as a full channel
    or a Redis blip would): the watcher sees the end after a gap and must catch up."""

    def __init__(self, send: Any) -> None:
        self._send = send
        self._held: dict[str, dict[str, Any]] = {}
        self.dropped = 0

    async def __call__(self, channel: str, message: dict[str, Any]) -> None:
        if message.get("type") == "answer.entry":
            held = self._held.pop(channel, None)
            if message["entry"]["kind"] == "delta":
                if held is not None:
                    await self._send(channel, held)
                self._held[channel] = message
                return
            if held is not None:
                self.dropped += 1
        await self._send(channel, message)


@pytest.mark.parametrize("stream", [False, True])
async def test_the_response_is_the_stored_text_when_the_last_delta_is_lost(
    http: httpx.AsyncClient,
    api_key: Key,
    scripted_worker: RunningWorker,
    monkeypatch: pytest.MonkeyPatch,
    stream: bool,
) -> None:
    layer = get_channel_layer()
    lossy = _LastDeltaLost(layer.send)
    monkeypatch.setattr(layer, "send", lossy)
    started = time.monotonic()
    response = await http.post(
        "/v1/chat/completions", json=chat(QUESTION, stream=stream), headers=api_key.headers
    )
    elapsed = time.monotonic() - started

    assert lossy.dropped == 1
    stored = await sync_to_async(Message.objects.get)(
        role="assistant", conversation__owner=api_key.key.user
    )
    assert (stored.status, stored.content) == ("complete", f"You said: {QUESTION}")
    if stream:
        text = "".join(
            chunk["choices"][0]["delta"].get("content") or ""
            for chunk in _chunks(response.text)
            if chunk["choices"]
        )
    else:
        text = response.json()["choices"][0]["message"]["content"]
    assert text == stored.content
    assert elapsed < 5, elapsed  # caught up from the log, not after a silence timeout


def _chunks(body: str) -> list[dict[str, Any]]:
    import json

    return [
        json.loads(block.removeprefix("data: "))
        for block in body.split("\n\n")
        if block.startswith("data: {")
    ]


@pytest.mark.parametrize("stream", [True, False])
async def test_a_retry_after_the_client_dropped_gets_the_whole_answer(
    http: httpx.AsyncClient, api_key: Key, scripted_worker: RunningWorker, stream: bool
) -> None:
    """An SDK's connection drops mid-answer and it retries with the same Idempotency-Key: the
    retry must get the whole answer, never the part generated before the drop as if complete
    (the first attempt's disconnect used to stop the run, and the retry returned 200 with
    `finish_reason: "stop"` and the cut text)."""
    question = "[[slow]] " + " ".join(f"w{i}" for i in range(60))
    headers = {**api_key.headers, "Idempotency-Key": "sdk-retry-after-drop"}
    await drop_mid_answer(api_key, chat(question, stream=stream), headers, scripted_worker)

    retry = await http.post("/v1/chat/completions", json=chat(question), headers=headers)

    assert retry.status_code == 200
    choice = retry.json()["choices"][0]
    assert (choice["message"]["content"], choice["finish_reason"]) == (
        f"You said: {question}",
        "stop",
    )
    stored = await sync_to_async(Message.objects.get)(
        role="assistant", conversation__owner=api_key.key.user
    )
    assert (stored.status, stored.content) == ("complete", f"You said: {question}")
    assert len(scripted_worker.engine.prompts) == 1  # the retry started nothing new


async def drop_mid_answer(
    api_key: Key, body: dict[str, Any], headers: dict[str, str], scripted: RunningWorker
) -> None:
    """Drive the ASGI app as daphne does and let the client go away a few words into the
    answer (after the first event when streaming)."""
    import asyncio

    client = LeavingClient(headers, body)
    try:
        await until(lambda: scripted.engine.prompts, timeout_s=2)
        await asyncio.sleep(0.3)  # a few words generated
        await client.leave()
    finally:
        client.app.cancel()
