"""Extensions: templates by reference (the same prompt bytes as the chat socket) and priority."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth.models import User

from chatapp.conversations.models import Message
from chatapp.prompts.models import PromptTemplateVersion
from inference.engines.scripted import ScriptedEngine
from inference.wire.transport import Transport
from inference.worker import InferenceWorker
from tests.chatapp.openai_api.conftest import Key, chat, key_create
from tests.chatapp.prompts.factories import SYSTEM
from tests.conftest import Connect, RunningWorker
from tests.support.sockets import open_socket, receive_until
from tests.support.templates import RENDERED, VALUES, templated
from tests.support.workers import worker_settings

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_template_reference_gives_the_same_prompt_bytes_as_the_chat_socket(
    http: httpx.AsyncClient,
    api_key: Key,
    connect: Connect,
    published: PromptTemplateVersion,
    scripted_worker: RunningWorker,
) -> None:
    alice = await sync_to_async(User.objects.create_user)("alice", password="pw-alice-123")
    ws = await open_socket(connect, alice)
    await ws.send_json_to(templated(published, variables=VALUES))
    await receive_until(ws, "chat.done")
    socket_prompt = scripted_worker.engine.prompts[-1]

    body = chat("unused", template={"id": published.template_id, "variables": VALUES})
    body["messages"] = []
    response = await http.post("/v1/chat/completions", json=body, headers=api_key.headers)

    assert response.status_code == 200, response.text
    api_prompt = scripted_worker.engine.prompts[-1]
    assert api_prompt == socket_prompt  # byte-identical: one prefix in vLLM's cache
    assert api_prompt.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n")
    assert response.json()["choices"][0]["message"]["content"] == f"You said: {RENDERED}"
    # the template's sampling applies (max_tokens 40 here) and the conversation records it
    message = await sync_to_async(Message.objects.select_related("conversation").get)(
        id=uuid.UUID(response.json()["id"].removeprefix("chatcmpl-"))
    )
    assert message.conversation.template_version_id == published.pk


async def test_messages_after_a_template_continue_its_conversation(
    http: httpx.AsyncClient,
    api_key: Key,
    published: PromptTemplateVersion,
    scripted_worker: RunningWorker,
) -> None:
    body = chat(
        "Any news?",
        template={"id": published.template_id, "version": published.version, "variables": VALUES},
    )
    body["messages"] = [
        {"role": "assistant", "content": "We are looking into it."},
        {"role": "user", "content": "Any news?"},
    ]
    response = await http.post("/v1/chat/completions", json=body, headers=api_key.headers)
    assert response.status_code == 200, response.text
    prompt = scripted_worker.engine.prompts[-1]
    assert prompt.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n")
    assert (
        prompt.index(RENDERED) < prompt.index("We are looking into it.") < prompt.index("Any news?")
    )


@pytest.mark.parametrize(
    ("template", "status", "param"),
    [
        ({"id": 999_999}, 404, "template"),
        ({"id": "TEMPLATE", "version": 7}, 404, "template"),
        ({"id": "TEMPLATE", "sha256": "0" * 64, "variables": VALUES}, 400, "template.sha256"),
        ({"id": "TEMPLATE", "variables": {"order_id": "A-1"}}, 400, "template.variables"),
        ({"id": "TEMPLATE", "variables": {**VALUES, "remedy": "cash"}}, 400, "template.variables"),
        ({"id": "TEMPLATE", "variables": {**VALUES, "extra": "x"}}, 400, "template.variables"),
    ],
)
async def test_bad_template_references_are_refused(
    http: httpx.AsyncClient,
    api_key: Key,
    published: PromptTemplateVersion,
    template: dict[str, object],
    status: int,
    param: str,
) -> None:
    if template["id"] == "TEMPLATE":
        template = {**template, "id": published.template_id}
    body = chat("hi", template=template)
    body["messages"] = []
    response = await http.post("/v1/chat/completions", json=body, headers=api_key.headers)
    assert response.status_code == status, response.text
    assert response.json()["error"]["param"] == param


async def test_a_system_message_with_a_template_is_refused(
    http: httpx.AsyncClient, api_key: Key, published: PromptTemplateVersion
) -> None:
    body = chat("hi", template={"id": published.template_id, "variables": VALUES})
    body["messages"].insert(0, {"role": "system", "content": "Be a pirate."})
    response = await http.post("/v1/chat/completions", json=body, headers=api_key.headers)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "messages[0].role"


@pytest.fixture
async def capped_worker() -> AsyncIterator[InferenceWorker]:
    """A worker that runs one background request at a time (of four slots)."""
    worker = InferenceWorker(
        engine=ScriptedEngine(),
        transport=Transport(layer=get_channel_layer()),
        settings=worker_settings(max_background=1),
    )
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(worker.ready.wait(), 5)
    yield worker
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_a_background_key_waits_behind_the_background_cap_and_chat_does_not(
    http: httpx.AsyncClient, capped_worker: InferenceWorker
) -> None:
    batch = await sync_to_async(key_create)("batch", priority="background")
    chat_key = await sync_to_async(key_create)("chat")
    slow = chat("[[slow]] " + " ".join(["word"] * 80))  # 4 s each: all start before any ends

    def post(key: Key, **extra: object) -> asyncio.Task[httpx.Response]:
        return asyncio.create_task(
            http.post("/v1/chat/completions", json={**slow, **extra}, headers=key.headers)
        )

    async def settle() -> None:
        # one request at a time reaches the database: the tests' in-memory SQLite locks
        # whole tables against concurrent writers (file SQLite and PostgreSQL wait instead)
        await asyncio.sleep(0.3)

    requests = [post(batch)]
    await settle()
    requests.append(post(batch))
    await settle()
    # asking for interactive does not lift a background key's priority
    requests.append(post(batch, priority="interactive"))
    await settle()
    assert capped_worker.active_requests == 1  # the others wait for the background slot
    requests.append(post(chat_key))
    await settle()
    assert capped_worker.active_requests == 2  # chat is not held up by the background queue
    # a request may ask for background on its own
    requests.append(post(chat_key, priority="background"))
    await settle()
    assert capped_worker.active_requests == 2
    for response in await asyncio.gather(*requests):
        assert response.status_code == 200
        assert response.json()["choices"][0]["message"]["content"].startswith("You said:")
