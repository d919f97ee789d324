"""A long conversation over the socket on the real engine (tiny model): it keeps working past
the model's context, and its history stays a cached prefix from turn to turn.

Each turn's prompt starts with the previous turn's prompt, so vLLM reuses its KV blocks: the
cached prompt tokens are at least the previous prompt rounded down to the block size (the
random model's answers may not re-tokenize to the same ids, so the answer's own blocks are
not asserted here; `bench/long_conversation.py` measures them on SmolLM2). When the history
outgrows the context, the oldest turns go in a large step (half the budget) and the turns after
it are cached again.
"""

from __future__ import annotations

import itertools

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from tests.conftest import Connect
from tests.support.sockets import open_socket, receive_until, send_frame

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.django_db(transaction=True),
]

BLOCK = 128  # vLLM's CPU block size: only whole blocks are cached
CONTEXT = 2048  # tiny_engine_settings' max_model_len
TURNS = 16


def question(turn: int) -> str:
    # ~170 tokens a question: 16 turns outgrow the 2,048-token context at least once
    detail = " ".join(f"item{turn}-{i} arrived damaged and the box was open" for i in range(12))
    return f"Turn {turn}: my order {turn}{turn} is late and {detail}. What can I do?"


async def test_a_conversation_longer_than_the_context_keeps_answering_from_cache(
    connect: Connect, vllm_worker: object
) -> None:
    alice = await sync_to_async(User.objects.create_user)("alice", password="pw-alice-123")
    ws = await open_socket(connect, alice)
    conversation_id = None
    usages = []
    for turn in range(1, TURNS + 1):
        await ws.send_json_to(send_frame(question(turn), conversation_id=conversation_id))
        frames = await receive_until(ws, "chat.done", timeout=60)
        conversation_id = frames[0]["conversation_id"]
        assert frames[-1]["status"] == "complete", frames[-1]
        usages.append(frames[-1]["usage"])

    prompts = [u["prompt_tokens"] for u in usages]
    trims = [t for t in range(1, TURNS) if prompts[t] < prompts[t - 1]]
    assert trims, f"the history never outgrew the context: {prompts}"
    # in large steps: never two turns in a row, and each drops a good part of the context
    assert all(b - a > 1 for a, b in itertools.pairwise(trims)), prompts
    assert all(prompts[t - 1] - prompts[t] >= CONTEXT // 4 for t in trims), prompts
    for t in range(1, TURNS):
        if t in trims:
            continue
        previous = usages[t - 1]["prompt_tokens"]
        assert usages[t]["cached_prompt_tokens"] >= previous // BLOCK * BLOCK, (t, usages)
    assert all(u["prompt_tokens"] + u["completion_tokens"] <= CONTEXT for u in usages)
