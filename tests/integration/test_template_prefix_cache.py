"""Templates and vLLM's prefix cache, with the real engine (tiny model) behind the socket.

Two users of one template share a byte- and token-identical prefix; the second one's request
reuses its KV blocks; publishing warms the cache so even the first user hits it.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from chatapp.prompts import services, tasks
from chatapp.prompts.models import PromptTemplateVersion
from inference.engines.vllm import VllmEngine
from inference.wire.protocol import ChatTurn
from inference.worker import InferenceWorker
from tests.chatapp.prompts.factories import template_create
from tests.conftest import Connect
from tests.support.sockets import open_socket, receive_until

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.django_db(transaction=True),
]

BLOCK = 128  # vLLM's CPU block size: only whole blocks are cached


def long_system_prompt() -> str:
    # unique per test so earlier tests in the session cannot have cached it
    policy = " ".join(
        f"Rule {i}: customers may return item class {i % 7} within {i % 5 + 14} days."
        for i in range(40)
    )
    return f"Support policy {uuid.uuid4().hex}. {policy}"


async def user(name: str) -> User:
    return await sync_to_async(User.objects.create_user)(name, password=f"pw-{name}-123")


async def first_message(
    connect: Connect, who: User, version: PromptTemplateVersion, order_id: str
) -> dict[str, Any]:
    ws = await open_socket(connect, who)
    await ws.send_json_to(
        {
            "type": "chat.send",
            "id": str(uuid.uuid4()),
            "conversation_id": None,
            "template": {
                "id": version.template_id,
                "version": version.version,
                "sha256": version.sha256,
            },
            "variables": {"order_id": order_id, "remedy": "refund"},
        }
    )
    frames = await receive_until(ws, "chat.done", timeout=60)
    done: dict[str, Any] = frames[-1]
    return done


async def publish(system_prompt: str) -> PromptTemplateVersion:
    template = await sync_to_async(template_create)(
        name=f"t-{uuid.uuid4().hex[:6]}", system_prompt=system_prompt, sampling={"max_tokens": 4}
    )
    version: PromptTemplateVersion = await sync_to_async(services.template_publish)(
        template=template, user=None
    )
    return version


async def test_two_users_of_a_template_share_one_token_prefix(vllm_engine: VllmEngine) -> None:
    system = long_system_prompt()
    builder = vllm_engine.prompt_builder

    def build(question: str) -> list[int]:
        return builder.build(
            system=system,
            messages=[ChatTurn(role="user", content=question)],
            max_tokens=4,
            trim=False,
        ).token_ids

    ids_first = await asyncio.to_thread(build, "My order A-1 has not arrived.")
    ids_second = await asyncio.to_thread(build, "My order B-22 has not arrived.")
    ids_shared = (
        await asyncio.to_thread(builder.build, system=system, messages=[], max_tokens=1, trim=False)
    ).token_ids
    common = next(
        (i for i, (a, b) in enumerate(zip(ids_first, ids_second, strict=False)) if a != b),
        min(len(ids_first), len(ids_second)),
    )
    assert len(ids_shared) > 2 * BLOCK
    # the system block's tokens (what a warm-up prefills) start both prompts exactly
    assert common >= len(ids_shared)
    assert ids_first[: len(ids_shared)] == ids_shared == ids_second[: len(ids_shared)]


async def test_the_second_user_of_a_template_hits_the_prefix_cache(
    connect: Connect,
    vllm_worker: InferenceWorker,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tasks.warm_template_version, "delay", lambda *_args: None)  # no warm-up
    version = await publish(long_system_prompt())
    first = await first_message(connect, await user("ann"), version, "A-1")
    second = await first_message(connect, await user("ben"), version, "B-22")

    assert first["usage"]["cached_prompt_tokens"] == 0
    prefix_blocks = first["usage"]["prompt_tokens"] // BLOCK
    assert prefix_blocks >= 2
    assert second["usage"]["cached_prompt_tokens"] >= (prefix_blocks - 1) * BLOCK


async def test_publishing_warms_the_cache_so_the_first_user_hits_it(
    connect: Connect,
    vllm_worker: InferenceWorker,
) -> None:
    version = await publish(long_system_prompt())  # eager Celery: warm-up runs now
    await sync_to_async(version.refresh_from_db)()
    assert version.warmed_at is not None, version.warm_error
    assert version.warm_prompt_tokens is not None
    assert version.warm_prompt_tokens > 2 * BLOCK

    first = await first_message(connect, await user("cat"), version, "C-333")
    assert first["usage"]["cached_prompt_tokens"] >= (version.warm_prompt_tokens // BLOCK) * BLOCK
