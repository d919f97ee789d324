"""Templated sends over the socket: references, variables, patches, resend, publish push."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User

from chatapp.conversations.models import Message
from chatapp.prompts import services
from chatapp.prompts.models import PromptTemplate, PromptTemplateVersion
from tests.chatapp.prompts.factories import SYSTEM, template_create
from tests.conftest import Connect, RunningWorker
from tests.support.sockets import answer_text, ask, open_socket, receive_until
from tests.support.templates import RENDERED, VALUES, full_text, patched, ref, templated

pytestmark = pytest.mark.django_db(transaction=True)


async def stored_user_text(frames: list[dict[str, Any]]) -> str:
    message = await sync_to_async(Message.objects.get)(id=frames[0]["user_message_id"])
    return message.content


async def test_variables_only_render_the_body_and_use_the_template_system_prompt(
    connect: Connect,
    alice: User,
    published: PromptTemplateVersion,
    scripted_worker: RunningWorker,
) -> None:
    ws = await open_socket(connect, alice)
    frame = templated(published, variables=VALUES)
    await ws.send_json_to(frame)
    frames = await receive_until(ws, "chat.done")

    assert await stored_user_text(frames) == RENDERED
    assert answer_text(frames) == f"You said: {RENDERED}"
    prompt = scripted_worker.engine.prompts[-1]
    # the template's system prompt is the prefix
    assert prompt.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n")
    wire = json.dumps(frame)
    assert SYSTEM not in wire
    assert "has not arrived" not in wire  # only the reference and the values travel

    # follow-ups send only their text and keep the template's system prompt
    await ws.send_json_to(
        {
            "type": "chat.send",
            "id": str(uuid.uuid4()),
            "conversation_id": frames[0]["conversation_id"],
            "text": "Any news?",
        }
    )
    await receive_until(ws, "chat.done")
    follow_up = scripted_worker.engine.prompts[-1]
    assert follow_up.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n")
    assert RENDERED in follow_up


async def test_a_patch_of_the_users_edits_is_applied_and_verified(
    connect: Connect,
    alice: User,
    published: PromptTemplateVersion,
) -> None:
    edited = RENDERED.replace("a refund", "a replacement 🚲, in blue") + " Thanks!"
    ws = await open_socket(connect, alice)
    frame = patched(published, edited)
    await ws.send_json_to(frame)
    frames = await receive_until(ws, "chat.done")
    assert await stored_user_text(frames) == edited
    assert len(frame["patch"]) < len(edited)


async def test_a_hash_mismatch_asks_for_the_full_text_which_then_goes_through(
    connect: Connect,
    alice: User,
    published: PromptTemplateVersion,
    scripted_worker: RunningWorker,
) -> None:
    edited = RENDERED + " (second attempt)"
    ws = await open_socket(connect, alice)
    frame = patched(published, edited, hashed="something else entirely")
    await ws.send_json_to(frame)
    resend = await ws.receive_json_from(timeout=5)
    assert resend == {"type": "chat.resend_full", "id": frame["id"], "reason": "hash_mismatch"}
    assert await sync_to_async(Message.objects.count)() == 0

    await ws.send_json_to(full_text(frame, edited))
    frames = await receive_until(ws, "chat.done")
    assert frames[0]["id"] == frame["id"]
    assert await stored_user_text(frames) == edited
    prompt = scripted_worker.engine.prompts[-1]
    assert prompt.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n")


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda f: {**f, "template": {**f["template"], "sha256": "0" * 64}}, "base_mismatch"),
        (lambda f: {**f, "patch": "@@ -1,4 +1,4 @@\n-XXXX\n+YYYY\n"}, "patch_failed"),
        # no patch, but the browser's render differs from the server's
        (lambda f: {k: v for k, v in f.items() if k != "patch"}, "hash_mismatch"),
    ],
)
async def test_a_stale_base_or_unappliable_patch_asks_for_the_full_text(
    connect: Connect,
    alice: User,
    published: PromptTemplateVersion,
    mutate: Any,
    reason: str,
) -> None:
    edited = RENDERED + "!"
    frame = patched(published, edited)
    ws = await open_socket(connect, alice)
    await ws.send_json_to(mutate(frame))
    resend = await ws.receive_json_from(timeout=5)
    assert (resend["type"], resend["reason"]) == ("chat.resend_full", reason)


async def test_unknown_or_disabled_templates_are_a_typed_error(
    connect: Connect,
    alice: User,
    published: PromptTemplateVersion,
) -> None:
    ws = await open_socket(connect, alice)
    await ws.send_json_to(
        templated(published, variables=VALUES) | {"template": {**ref(published), "version": 99}}
    )
    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"]) == ("chat.error", "template_unknown")

    await sync_to_async(PromptTemplate.objects.filter(pk=published.template_id).update)(
        enabled=False
    )
    await ws.send_json_to(templated(published, variables=VALUES))
    error = await ws.receive_json_from(timeout=5)
    assert error["code"] == "template_unknown"


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"variables": {"order_id": "A" * 21, "remedy": "refund"}}, "too_large"),
        ({"variables": VALUES, "patch": "x" * 16_001, "result_sha256": "a" * 64}, "too_large"),
        ({"variables": {"order_id": "A-1"}}, "invalid"),
        ({"variables": {"order_id": 7, "remedy": "refund"}}, "invalid"),
        ({"variables": VALUES, "patch": "@@ -1 +1 @@"}, "invalid"),  # no result hash
    ],
)
async def test_bad_variables_and_oversized_patches_are_typed_errors(
    connect: Connect,
    alice: User,
    published: PromptTemplateVersion,
    fields: dict[str, Any],
    code: str,
) -> None:
    ws = await open_socket(connect, alice)
    await ws.send_json_to(templated(published, **fields))
    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"]) == ("chat.error", code)
    assert await sync_to_async(Message.objects.count)() == 0


async def test_a_template_on_a_follow_up_is_refused(
    connect: Connect,
    alice: User,
    published: PromptTemplateVersion,
) -> None:
    ws = await open_socket(connect, alice)
    frames = await ask(ws, "hello")
    await ws.send_json_to(
        templated(published, variables=VALUES) | {"conversation_id": frames[0]["conversation_id"]}
    )
    error = await ws.receive_json_from(timeout=5)
    assert (error["code"], error["message"]) == (
        "invalid",
        "A template can only start a new conversation.",
    )


async def test_publishing_pushes_to_open_pages_and_warms_the_prefix(
    connect: Connect,
    alice: User,
    scripted_worker: RunningWorker,
) -> None:
    ws: WebsocketCommunicator = await open_socket(connect, alice)
    template = await sync_to_async(template_create)()
    version = await sync_to_async(services.template_publish)(template=template, user=None)

    pushed = await ws.receive_json_from(timeout=5)
    assert pushed["type"] == "templates.changed"
    assert pushed["etag"]
    # the warm-up went through the worker as a prompt that is exactly the shared prefix
    warm_prompt = scripted_worker.engine.prompts[-1]
    assert warm_prompt.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n")
    assert "My order" not in warm_prompt
    for _ in range(50):
        await sync_to_async(version.refresh_from_db)()
        if version.warmed_at is not None:
            break
        await asyncio.sleep(0.05)
    assert version.warmed_at is not None
    assert version.warm_prompt_tokens
