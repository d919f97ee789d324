"""Every refusal in OpenAI's error shape, with the status and headers clients act on."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from chatapp.apikeys import services
from chatapp.conversations.models import Message
from tests.chatapp.openai_api.conftest import (
    Key,
    chat,
    key_create,
    openai_client,
    slow_answer_running,
)
from tests.conftest import RunningWorker

pytestmark = pytest.mark.django_db(transaction=True)


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["message"]
    return dict(body["error"])


def with_hi(**fields: object) -> bytes:
    """A valid request body ("MODEL" is replaced by the served model) with `fields` changed."""
    body = {"model": "MODEL", "messages": [{"role": "user", "content": "hi"}], **fields}
    return json.dumps(body).encode()


def talk(*turns: tuple[str, object]) -> bytes:
    return with_hi(messages=[{"role": role, "content": content} for role, content in turns])


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        (b"{not json", None, "invalid_json"),
        (b"[1, 2]", None, "invalid_json"),
        (b'{"model": "MODEL"}', "messages", None),
        (b'{"messages": [{"role": "user", "content": "hi"}]}', "model", None),
        (talk(("tool", "x")), "messages[0].role", None),
        (talk(("user", 5)), "messages[0].content", None),
        (with_hi(n=2), "n", None),
        (with_hi(max_tokens="5"), "max_tokens", None),
        (with_hi(max_tokens=0), "max_tokens", None),
        (with_hi(stream="yes"), "stream", None),
        (with_hi(temperature=3), "temperature", None),
        (with_hi(bogus=1), "bogus", "unknown_parameter"),
        # what the engine cannot do (or the service does not do) is refused, named
        (with_hi(tools=[{"type": "function"}]), "tools", "unsupported_parameter"),
        (with_hi(tool_choice="required"), "tool_choice", "unsupported_parameter"),
        (with_hi(modalities=["text", "audio"]), "modalities", "unsupported_parameter"),
        (with_hi(ignore_eos=True), "ignore_eos", "unsupported_parameter"),
        (with_hi(store=True), "store", "unsupported_parameter"),
        # honoured parameters with a bad shape
        (with_hi(stop=["a", "b", "c", "d", "e"]), "stop", None),
        (with_hi(stop=["a", ""]), "stop[1]", None),
        (with_hi(stop=5), "stop", None),
        (with_hi(frequency_penalty=2.5), "frequency_penalty", None),
        (with_hi(presence_penalty=-3), "presence_penalty", None),
        (with_hi(seed=1.5), "seed", None),
        (with_hi(seed="7"), "seed", None),
        (with_hi(seed=2**63), "seed", None),
        (with_hi(logprobs="yes"), "logprobs", None),
        (with_hi(top_logprobs=3), "top_logprobs", None),
        (with_hi(logprobs=True, top_logprobs=21), "top_logprobs", None),
        (with_hi(logit_bias={"abc": 1}), "logit_bias", None),
        (with_hi(logit_bias={"-5": 1}), "logit_bias", None),
        (with_hi(logit_bias={"5": 101}), "logit_bias.5", None),
        (with_hi(response_format="json"), "response_format", None),
        (with_hi(response_format={}), "response_format.type", None),
        (with_hi(response_format={"type": "xml"}), "response_format.type", None),
        (
            with_hi(response_format={"type": "json_object", "json_schema": {}}),
            "response_format.json_schema",
            "unknown_parameter",
        ),
        (with_hi(response_format={"type": "json_schema"}), "response_format.json_schema", None),
        (
            with_hi(response_format={"type": "json_schema", "json_schema": "x"}),
            "response_format.json_schema",
            None,
        ),
        (
            with_hi(response_format={"type": "json_schema", "json_schema": {"schema": {}}}),
            "response_format.json_schema.name",
            None,
        ),
        (
            with_hi(response_format={"type": "json_schema", "json_schema": {"name": "a b"}}),
            "response_format.json_schema.name",
            None,
        ),
        (
            with_hi(
                response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": []}}
            ),
            "response_format.json_schema.schema",
            None,
        ),
        (
            with_hi(
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "x", "strict": "yes"},
                }
            ),
            "response_format.json_schema.strict",
            None,
        ),
        (
            with_hi(
                response_format={"type": "json_schema", "json_schema": {"name": "x", "bogus": 1}}
            ),
            "response_format.json_schema.bogus",
            "unknown_parameter",
        ),
        (with_hi(messages=[]), "messages", None),
        (talk(("user", "  ")), "messages[0].content", None),
        (talk(("user", "a"), ("assistant", "b")), "messages", None),
        (talk(("user", "a"), ("system", "b"), ("user", "c")), "messages[1].role", None),
        (
            talk(("user", [{"type": "image_url", "image_url": {"url": "x"}}])),
            "messages[0].content",
            None,
        ),
        (b'{"model": "MODEL", "messages": [{"role": "user", "content": "\\ud800"}]}', None, None),
        # PostgreSQL's text cannot hold NUL: refused here, not a 500 when the turn is stored
        (talk(("user", "nul\x00inside")), "messages[0].content", None),
        (talk(("system", "be \x00 brief"), ("user", "hi")), "messages[0].content", None),
    ],
)
async def test_invalid_requests_get_400_naming_the_parameter(
    http: httpx.AsyncClient,
    api_key: Key,
    body: bytes,
    param: str | None,
    code: str | None,
) -> None:
    body = body.replace(b"MODEL", settings.CHAT_API_MODEL.encode())
    response = await http.post(
        "/v1/chat/completions",
        content=body,
        headers={**api_key.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    if code is not None:
        assert error["code"] == code
    assert await sync_to_async(Message.objects.count)() == 0  # nothing stored


@pytest.mark.parametrize(
    ("limit", "status", "code"),
    [
        ("CHAT_MAX_MESSAGE_CHARS", 400, "too_large"),  # a message over the length limit
        ("DATA_UPLOAD_MAX_MEMORY_SIZE", 413, "request_too_large"),  # a body over Django's
    ],
)
async def test_a_message_or_body_over_its_limit_is_refused_in_the_error_shape(
    http: httpx.AsyncClient, api_key: Key, limit: str, status: int, code: str
) -> None:
    response = await http.post(
        "/v1/chat/completions",
        json=chat("x" * (getattr(settings, limit) + 1)),
        headers=api_key.headers,
    )
    assert response.status_code == status
    assert error_of(response)["code"] == code


async def test_a_conversation_longer_than_the_context_is_400_context_length_exceeded(
    http: httpx.AsyncClient, api_key: Key, scripted_worker: RunningWorker
) -> None:
    scripted_worker.engine.max_prompt_tokens = 12
    response = await http.post(
        "/v1/chat/completions",
        json=chat(" ".join(["order"] * 20)),
        headers=api_key.headers,
    )
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert (error["type"], error["code"], error["param"]) == (
        "invalid_request_error",
        "context_length_exceeded",
        "messages",
    )
    assert "too long for the model" in error["message"]
    answer = await sync_to_async(Message.objects.get)(role=Message.Role.ASSISTANT)
    assert (answer.status, answer.error_code) == ("failed", "too_long")

    # a short one still works: the refusal cost nothing
    ok = await http.post("/v1/chat/completions", json=chat("hi"), headers=api_key.headers)
    assert ok.status_code == 200


async def test_truncation_auto_trims_the_oldest_turns_instead_of_refusing(
    http: httpx.AsyncClient, api_key: Key, scripted_worker: RunningWorker
) -> None:
    scripted_worker.engine.max_prompt_tokens = 12
    history = [
        {"role": "user", "content": " ".join(["order"] * 20)},
        {"role": "assistant", "content": "Which order?"},
        {"role": "user", "content": "the blue one"},
    ]
    refused = await http.post(
        "/v1/chat/completions", json={**chat("x"), "messages": history}, headers=api_key.headers
    )
    assert refused.status_code == 400
    assert error_of(refused)["code"] == "context_length_exceeded"

    trimmed = await http.post(
        "/v1/chat/completions",
        json={**chat("x"), "messages": history, "truncation": "auto"},
        headers=api_key.headers,
    )
    assert trimmed.status_code == 200, trimmed.text
    assert trimmed.json()["choices"][0]["message"]["content"] == "You said: the blue one"
    assert "order order" not in scripted_worker.engine.prompts[-1]  # the oldest turns went


async def test_missing_wrong_and_revoked_keys_get_401(
    http: httpx.AsyncClient, api_key: Key, scripted_worker: RunningWorker
) -> None:
    for headers in (
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Basic dXNlcjpwdw=="},
        {"Authorization": "Bearer ick_00000000_nope"},
        {"Authorization": api_key.headers["Authorization"] + "x"},
        {"Authorization": "Bearer " + api_key.secret.replace("ick_", "ick_1")},
    ):
        response = await http.post("/v1/chat/completions", json=chat("hi"), headers=headers)
        assert response.status_code == 401, headers
        assert error_of(response)["code"] in ("missing_api_key", "invalid_api_key")

    ok = await http.post("/v1/chat/completions", json=chat("hi"), headers=api_key.headers)
    assert ok.status_code == 200
    await sync_to_async(services.api_keys_revoke)(key_ids=[api_key.key.pk])
    revoked = await http.post("/v1/chat/completions", json=chat("hi"), headers=api_key.headers)
    assert revoked.status_code == 401
    models = await http.get("/v1/models", headers=api_key.headers)
    assert models.status_code == 401


async def test_an_unknown_model_is_404(
    client: openai.AsyncOpenAI, scripted_worker: RunningWorker
) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.code == "model_not_found"
    assert caught.value.param == "model"


async def test_wrong_method_is_405(http: httpx.AsyncClient, api_key: Key) -> None:
    response = await http.get("/v1/chat/completions", headers=api_key.headers)
    assert response.status_code == 405
    assert error_of(response)["code"] == "method_not_allowed"


async def test_no_worker_is_503_with_retry_after(http: httpx.AsyncClient, api_key: Key) -> None:
    response = await http.post("/v1/chat/completions", json=chat("hi"), headers=api_key.headers)
    assert response.status_code == 503
    assert error_of(response)["code"] == "no_worker"
    assert int(response.headers["Retry-After"]) >= 1
    assert await sync_to_async(Message.objects.count)() == 0


async def test_the_keys_rate_limit_is_429_with_retry_after(
    http: httpx.AsyncClient, scripted_worker: RunningWorker
) -> None:
    key = await sync_to_async(key_create)("limited", rate_limit=2, rate_window_s=30)
    for _ in range(2):
        ok = await http.post("/v1/chat/completions", json=chat("hi"), headers=key.headers)
        assert ok.status_code == 200
    response = await http.post("/v1/chat/completions", json=chat("hi"), headers=key.headers)
    assert response.status_code == 429
    assert error_of(response)["code"] == "rate_limit_exceeded"
    assert 1 <= int(response.headers["Retry-After"]) <= 30
    # another key of the same user has its own budget
    other = await sync_to_async(key_create)("limited")
    ok = await http.post("/v1/chat/completions", json=chat("hi"), headers=other.headers)
    assert ok.status_code == 200


async def test_the_keys_concurrency_limit_is_429_while_an_answer_runs(
    http: httpx.AsyncClient, scripted_worker: RunningWorker
) -> None:
    key = await sync_to_async(key_create)("single", max_concurrent=1)
    slow = await slow_answer_running(http, key.headers, scripted_worker.worker, 20)
    response = await http.post("/v1/chat/completions", json=chat("hi"), headers=key.headers)
    assert response.status_code == 429
    assert error_of(response)["code"] == "concurrency_limit_exceeded"
    assert "Retry-After" in response.headers
    assert (await slow).status_code == 200
    again = await http.post("/v1/chat/completions", json=chat("hi"), headers=key.headers)
    assert again.status_code == 200  # the finished answer gave its slot back


async def test_the_openai_client_raises_its_typed_errors(
    client: openai.AsyncOpenAI, scripted_worker: RunningWorker
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(
            model=settings.CHAT_API_MODEL, messages=[{"role": "user", "content": "hi"}], n=3
        )
    assert caught.value.param == "n"
    async with openai_client("ick_deadbeef_wrong") as bad:
        with pytest.raises(openai.AuthenticationError):
            await bad.models.list()


async def test_unknown_paths_answer_in_the_error_shape(
    http: httpx.AsyncClient, api_key: Key
) -> None:
    missing = await http.post("/v1/completions", json={}, headers=api_key.headers)
    assert missing.status_code == 404
    assert error_of(missing)["code"] == "unknown_url"


async def test_a_full_service_is_429_server_busy(http: httpx.AsyncClient) -> None:
    """One running slot and no queue in the whole service: a second request is refused."""
    import contextlib

    from channels.layers import get_channel_layer

    from inference.engines.scripted import ScriptedEngine
    from inference.wire.transport import Transport
    from inference.worker import InferenceWorker
    from tests.support.workers import worker_settings

    worker = InferenceWorker(
        engine=ScriptedEngine(),
        transport=Transport(layer=get_channel_layer()),
        settings=worker_settings(max_active=1, max_queue=0),
    )
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(worker.ready.wait(), 5)
        await asyncio.sleep(0.2)  # its first announcement
        key = await sync_to_async(key_create)("busy", max_concurrent=10)
        slow = await slow_answer_running(http, key.headers, worker, 20)
        response = await http.post("/v1/chat/completions", json=chat("hi"), headers=key.headers)
        assert response.status_code == 429
        assert error_of(response)["code"] == "server_busy"
        assert int(response.headers["Retry-After"]) == settings.CHAT_BUSY_RETRY_AFTER_S
        assert (await slow).status_code == 200
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_an_engine_failure_is_500_or_an_error_event_mid_stream(
    http: httpx.AsyncClient,
    client: openai.AsyncOpenAI,
    api_key: Key,
    scripted_worker: RunningWorker,
) -> None:
    # the scripted engine fails after two words: the stream has started by then
    stream = await client.chat.completions.create(
        model=settings.CHAT_API_MODEL,
        messages=[{"role": "user", "content": "[[fail]] please"}],
        stream=True,
    )
    received: list[str] = []
    with pytest.raises(openai.APIError) as caught:
        async for chunk in stream:
            received.append(chunk.choices[0].delta.content or "")
    assert "".join(received).startswith("You said")
    assert "model failed" in caught.value.message

    response = await http.post(
        "/v1/chat/completions", json=chat("[[fail]] please"), headers=api_key.headers
    )
    assert response.status_code == 500
    error = error_of(response)
    assert (error["type"], error["code"]) == ("server_error", "engine")
