"""Sampling parameters through the official openai client: what reaches the engine, stop
strings, logprobs in OpenAI's shape (the scripted engine's fakes: 0.0 for its word, then
` alt1`, ` alt2`... at -1, -2...). The real engine's behaviour (seed, JSON, logprobs, logit
bias) is tested on the live server (`tests/integration/test_openai_api.py`)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import openai
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from chatapp.answers.entries import LoggedDelta, log_entry_adapter
from chatapp.conversations.models import Message
from inference.engines.base import EngineRequest
from inference.wire.protocol import Delta, TokenLogprob, TopLogprob, worker_event_adapter
from tests.chatapp.openai_api.conftest import Key, chat, sse_events
from tests.conftest import RunningWorker

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "alpha beta gamma delta"
ANSWER = f"You said: {QUESTION}"
USER: list[Any] = [{"role": "user", "content": QUESTION}]


def last_request(worker: RunningWorker) -> EngineRequest:
    return worker.engine.requests[-1]


async def test_sampling_parameters_reach_the_engine(
    client: openai.AsyncOpenAI, scripted_worker: RunningWorker
) -> None:
    await client.chat.completions.create(
        model=settings.CHAT_API_MODEL,
        messages=USER,
        temperature=0.7,
        top_p=0.5,
        frequency_penalty=0.5,
        presence_penalty=-1.5,
        seed=1234,
        stop="zzz",
        logit_bias={"5": -100, "17": 2},
    )
    sent = last_request(scripted_worker)
    assert (sent.temperature, sent.top_p) == (0.7, 0.5)
    assert (sent.frequency_penalty, sent.presence_penalty) == (0.5, -1.5)
    assert sent.seed == 1234
    assert "zzz" in sent.stop
    assert sent.logit_bias == {5: -100.0, 17: 2.0}
    assert (sent.json_schema, sent.logprobs) == (None, None)


async def test_unset_parameters_stay_neutral(
    client: openai.AsyncOpenAI, scripted_worker: RunningWorker
) -> None:
    await client.chat.completions.create(
        model=settings.CHAT_API_MODEL,
        messages=USER,
        stop=[],
        logit_bias={},
        response_format={"type": "text"},
        logprobs=False,
        top_logprobs=0,
    )
    sent = last_request(scripted_worker)
    assert (sent.frequency_penalty, sent.presence_penalty, sent.seed) == (0.0, 0.0, None)
    assert sent.stop == ()  # the scripted model has no stop strings of its own
    assert (sent.logit_bias, sent.json_schema, sent.logprobs) == (None, None, None)


async def test_a_stop_string_ends_the_answer_before_it(
    client: openai.AsyncOpenAI, scripted_worker: RunningWorker
) -> None:
    completion = await client.chat.completions.create(
        model=settings.CHAT_API_MODEL, messages=USER, stop=["delta", " gam"]
    )
    choice = completion.choices[0]
    assert choice.message.content == "You said: alpha beta"  # the earliest stop, left out
    assert choice.finish_reason == "stop"
    stored = await sync_to_async(Message.objects.get)(
        id=uuid.UUID(completion.id.removeprefix("chatcmpl-"))
    )
    assert stored.content == "You said: alpha beta"

    stream = await client.chat.completions.create(
        model=settings.CHAT_API_MODEL, messages=USER, stop="beta", stream=True
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: alpha "
    assert chunks[-1].choices[0].finish_reason == "stop"


@pytest.mark.parametrize(
    ("response_format", "schema"),
    [
        ({"type": "json_object"}, {}),
        (
            {
                "type": "json_schema",
                "json_schema": {
                    "name": "ticket",
                    "description": "a support ticket",
                    "strict": True,
                    "schema": {
                        "type": "object",
                        "properties": {"urgent": {"type": "boolean"}},
                        "required": ["urgent"],
                    },
                },
            },
            {
                "type": "object",
                "properties": {"urgent": {"type": "boolean"}},
                "required": ["urgent"],
            },
        ),
        ({"type": "json_schema", "json_schema": {"name": "any"}}, {}),
    ],
)
async def test_response_format_asks_the_engine_for_structured_outputs(
    client: openai.AsyncOpenAI,
    scripted_worker: RunningWorker,
    response_format: Any,
    schema: dict[str, Any],
) -> None:
    await client.chat.completions.create(
        model=settings.CHAT_API_MODEL, messages=USER, response_format=response_format
    )
    assert last_request(scripted_worker).json_schema == schema  # {}: any JSON object


def words() -> list[str]:
    return ["You", " said:", " alpha", " beta", " gamma", " delta"]


async def test_logprobs_in_openais_shape(
    client: openai.AsyncOpenAI, scripted_worker: RunningWorker
) -> None:
    completion = await client.chat.completions.create(
        model=settings.CHAT_API_MODEL, messages=USER, logprobs=True, top_logprobs=3
    )
    assert last_request(scripted_worker).logprobs == 3
    choice = completion.choices[0]
    assert choice.message.content == ANSWER
    assert choice.logprobs is not None
    content = choice.logprobs.content
    assert content is not None
    assert [t.token for t in content] == words()
    for token in content:
        assert token.logprob == 0.0
        assert token.bytes == list(token.token.encode())
        assert [(t.token, t.logprob) for t in token.top_logprobs] == [
            (token.token, 0.0),
            (" alt1", -1.0),
            (" alt2", -2.0),
        ]
        assert token.top_logprobs[1].bytes == list(b" alt1")

    plain = await client.chat.completions.create(
        model=settings.CHAT_API_MODEL, messages=USER, logprobs=True
    )
    assert last_request(scripted_worker).logprobs == 0
    assert plain.choices[0].logprobs is not None
    tokens = plain.choices[0].logprobs.content or []
    assert [t.token for t in tokens] == words()
    assert all(t.top_logprobs == [] for t in tokens)


async def test_streamed_chunks_carry_their_tokens_logprobs(
    client: openai.AsyncOpenAI, scripted_worker: RunningWorker
) -> None:
    question = " ".join(f"w{i}" for i in range(30))
    stream = await client.chat.completions.create(
        model=settings.CHAT_API_MODEL,
        messages=[{"role": "user", "content": question}],
        logprobs=True,
        top_logprobs=1,
        stream=True,
    )
    chunks = [chunk async for chunk in stream]
    texts = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(texts) > 1
    tokens = []
    for chunk in texts:
        logprobs = chunk.choices[0].logprobs
        assert logprobs is not None
        assert logprobs.content is not None
        # each chunk's tokens spell exactly its text
        assert "".join(t.token for t in logprobs.content) == chunk.choices[0].delta.content
        tokens += logprobs.content
    assert "".join(t.token for t in tokens) == f"You said: {question}"
    assert all(len(t.top_logprobs) == 1 for t in tokens)
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert chunks[-1].choices[0].logprobs is None


async def test_without_logprobs_the_wire_says_null(
    http: httpx.AsyncClient, api_key: Key, scripted_worker: RunningWorker
) -> None:
    response = await http.post("/v1/chat/completions", json=chat(QUESTION), headers=api_key.headers)
    assert response.json()["choices"][0]["logprobs"] is None
    streamed = await http.post(
        "/v1/chat/completions", json=chat(QUESTION, stream=True), headers=api_key.headers
    )
    chunks = sse_events(streamed.text)[:-1]
    assert all(c["choices"][0]["logprobs"] is None for c in chunks)

    asked = await http.post(
        "/v1/chat/completions",
        json=chat(QUESTION, logprobs=True, top_logprobs=1),
        headers=api_key.headers,
    )
    first = asked.json()["choices"][0]["logprobs"]["content"][0]
    assert first == {
        "token": "You",
        "logprob": 0.0,
        "bytes": [89, 111, 117],
        "top_logprobs": [{"token": "You", "logprob": 0.0, "bytes": [89, 111, 117]}],
    }
    assert asked.json()["choices"][0]["logprobs"]["refusal"] is None


def test_logprobs_are_absent_from_wire_and_log_entries_unless_asked() -> None:
    plain = Delta(request_id="r", seq=1, text="hi", tokens=1)
    assert "logprobs" not in plain.to_channel()
    assert "logprobs" not in LoggedDelta(seq=1, text="hi").model_dump_json()
    token = TokenLogprob(token="hi", logprob=-0.25, top=[TopLogprob(token="hi", logprob=-0.25)])
    asked = Delta(request_id="r", seq=1, text="hi", tokens=1, logprobs=[token])
    assert worker_event_adapter.validate_python(asked.to_channel()) == asked
    logged = LoggedDelta(seq=1, text="hi", logprobs=[token])
    assert log_entry_adapter.validate_json(logged.model_dump_json()) == logged
