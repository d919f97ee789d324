"""Chat completions with the official openai client (and raw HTTP for the wire format)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import openai
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from chatapp.conversations.models import Message
from tests.chatapp.openai_api.conftest import (
    Key,
    LeavingClient,
    chat,
    slow_answer_running,
    sse_events,
)
from tests.conftest import RunningWorker
from tests.support.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "where is my parcel number 42"


async def test_a_completion_answers_and_is_stored_as_the_keys_conversation(
    client: openai.AsyncOpenAI, api_key: Key, scripted_worker: RunningWorker
) -> None:
    completion = await client.chat.completions.create(
        model=settings.CHAT_API_MODEL, messages=[{"role": "user", "content": QUESTION}]
    )

    assert completion.choices[0].message.content == f"You said: {QUESTION}"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == settings.CHAT_API_MODEL
    usage = completion.usage
    assert usage is not None
    assert usage.completion_tokens == len(f"You said: {QUESTION}".split())
    assert usage.prompt_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert completion.id.startswith("chatcmpl-")
    stored = await sync_to_async(Message.objects.select_related("conversation").get)(
        id=uuid.UUID(completion.id.removeprefix("chatcmpl-"))
    )
    assert (stored.status, stored.content) == ("complete", f"You said: {QUESTION}")
    assert stored.conversation.owner_id == api_key.key.user_id
    assert stored.reply_to_id is not None


async def test_the_whole_conversation_reaches_the_model_in_order(
    client: openai.AsyncOpenAI, scripted_worker: RunningWorker
) -> None:
    completion = await client.chat.completions.create(
        model=settings.CHAT_API_MODEL,
        messages=[
            {"role": "system", "content": "You answer about parcels."},
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "first answer"},
            {"role": "user", "content": [{"type": "text", "text": "second question"}]},
        ],
        max_tokens=3,
    )

    prompt = scripted_worker.engine.prompts[-1]
    assert prompt.startswith("<|im_start|>system\nYou answer about parcels.<|im_end|>\n")
    assert prompt.index("first question") < prompt.index("first answer")
    assert prompt.index("first answer") < prompt.index("second question")
    assert completion.choices[0].message.content == "You said: second"
    assert completion.choices[0].finish_reason == "length"


async def test_streaming_sends_the_text_in_chunks_then_usage(
    client: openai.AsyncOpenAI, scripted_worker: RunningWorker
) -> None:
    question = " ".join(f"word{i}" for i in range(40))
    stream = await client.chat.completions.create(
        model=settings.CHAT_API_MODEL,
        messages=[{"role": "user", "content": question}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == f"You said: {question}"
    with_text = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(with_text) > 1  # streamed, not one block
    assert with_text[0].choices[0].delta.role == "assistant"
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finish] == ["stop"]
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert last.usage.completion_tokens == len(text.split())
    assert len({c.id for c in chunks}) == 1


async def test_the_stream_is_server_sent_events_ending_with_done(
    http: httpx.AsyncClient, api_key: Key, scripted_worker: RunningWorker
) -> None:
    response = await http.post(
        "/v1/chat/completions", json=chat("hello there", stream=True), headers=api_key.headers
    )

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    # the wait is never silent: a comment goes out before the model has said anything
    assert response.text.startswith(": waiting for the model\n\n")
    events = sse_events(response.text)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert all("usage" not in c for c in chunks)  # only when stream_options asks for it
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"][0]["delta"] == {}
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == (
        "You said: hello there"
    )


async def test_models_lists_the_served_model(
    client: openai.AsyncOpenAI, scripted_worker: RunningWorker
) -> None:
    models = await client.models.list()
    assert [m.id for m in models.data] == [settings.CHAT_API_MODEL]
    assert (await client.models.retrieve(settings.CHAT_API_MODEL)).id == settings.CHAT_API_MODEL
    with pytest.raises(openai.NotFoundError):
        await client.models.retrieve("gpt-4o")


@pytest.mark.parametrize("stream", [True, False])
async def test_a_dropped_client_aborts_the_engine_request(
    api_key: Key, scripted_worker: RunningWorker, stream: bool
) -> None:
    """Drive the ASGI app as daphne does: the client goes away while the answer generates
    (after the first chunk when streaming; while it waits for the whole answer otherwise)."""
    import asyncio

    from chatapp.answers.runtime import answer_runtime_close

    client = LeavingClient(
        api_key.headers, chat("[[slow]] " + " ".join(["word"] * 200), stream=stream)
    )
    try:
        if stream:
            await asyncio.wait_for(client.first_chunk.wait(), 10)
            assert client.sent[0]["status"] == 200
        else:
            await until(lambda: scripted_worker.engine.prompts, timeout_s=2)
            await asyncio.sleep(0.3)  # a few words generated
            assert client.sent == []  # nothing answered yet: the whole answer is awaited
        assert scripted_worker.worker.active_requests == 1
        await client.leave()
        await until(lambda: scripted_worker.worker.active_requests == 0)
        assert scripted_worker.worker.active_requests == 0
        assert scripted_worker.engine.stats().running_requests == 0
        message_id = await sync_to_async(
            lambda: Message.objects.filter(role="assistant").latest("created_at").id
        )()
        for _ in range(100):
            message = await sync_to_async(Message.objects.get)(id=message_id)
            if message.status != "streaming":
                break
            await asyncio.sleep(0.05)
        assert (message.status, message.error_code) == ("stopped", "client_disconnected")
        assert message.finish_reason == "abort"
        assert 0 < len(message.content.split()) < 200
    finally:
        client.app.cancel()
        await answer_runtime_close()


async def test_a_request_whose_relay_dies_fails_instead_of_hanging(
    http: httpx.AsyncClient, api_key: Key, scripted_worker: RunningWorker, settings: Any
) -> None:
    import asyncio

    from chatapp.answers.runtime import answer_runtime

    settings.CHAT_STALL_TIMEOUT_S = 0.5  # silence limit: 0.5 + 2 x 0.5 s relay heartbeat
    runtime = await answer_runtime()
    request = await slow_answer_running(http, api_key.headers, scripted_worker.worker, 200)
    runtime.task.cancel()  # the relay is gone: nothing will reach the request any more

    response = await asyncio.wait_for(request, 10)
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "interrupted"
    message = await sync_to_async(Message.objects.get)(
        role="assistant", conversation__owner=api_key.key.user
    )
    assert (message.status, message.error_code) == ("failed", "interrupted")


async def test_a_slow_first_token_streams_keep_alives_until_it_comes(
    http: httpx.AsyncClient, api_key: Key, scripted_worker: RunningWorker, settings: Any
) -> None:
    """The engine is silent for 1 s before its first token: the stream is open from the
    start, with a comment every keep-alive interval, and the answer follows."""
    settings.CHAT_SSE_KEEPALIVE_S = 0.2
    response = await http.post(
        "/v1/chat/completions",
        json=chat("[[stall]] patience", stream=True),
        headers=api_key.headers,
    )
    assert response.status_code == 200
    blocks = [b for b in response.text.split("\n\n") if b]
    first_data = next(i for i, b in enumerate(blocks) if b.startswith("data: "))
    assert first_data >= 4  # one at once, then one per 0.2 s of the 1 s silence
    assert all(b == ": waiting for the model" for b in blocks[:first_data])
    text = "".join(
        c["choices"][0]["delta"].get("content", "") for c in sse_events(response.text)[:-1]
    )
    assert text == "You said: [[stall]] patience"


async def test_a_first_token_past_its_deadline_is_504_or_an_error_event_in_the_stream(
    http: httpx.AsyncClient, api_key: Key, scripted_worker: RunningWorker, settings: Any
) -> None:
    settings.CHAT_FIRST_TOKEN_TIMEOUT_S = 0.3
    plain = await http.post(
        "/v1/chat/completions", json=chat("[[stall]] patience"), headers=api_key.headers
    )
    assert plain.status_code == 504
    assert plain.json()["error"]["code"] == "first_token_timeout"
    streamed = await http.post(
        "/v1/chat/completions",
        json=chat("[[stall]] patience", stream=True),
        headers=api_key.headers,
    )
    assert streamed.status_code == 200  # the headers went out before the deadline
    events = sse_events(streamed.text)
    assert events[-1] == "[DONE]"
    assert events[-2]["error"]["code"] == "first_token_timeout"
