"""No trim cliff, in the worker (scripted engine): when an answer ends and the conversation's
next turn will start its history at a new cut, the worker prefills that trimmed prompt in the
background before the question comes, so the turn that trims finds it in the prefix cache."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from channels.layers import InMemoryChannelLayer

from inference.engines.scripted import ScriptedEngine
from inference.models.chat_templates import CHATML_START
from inference.prefill import TRIM_PREFILL_PREFIX, trim_prefill
from inference.wire.protocol import (
    BACKGROUND_PRIORITY,
    REQUEST_CHANNEL,
    ChatTurn,
    GenerateRequest,
    SamplingOptions,
)
from inference.wire.transport import Transport
from inference.worker import InferenceWorker
from tests.inference.worker_events import collect, running
from tests.support.embedded import embedded_queue
from tests.support.workers import worker_settings

GENERATION_PROMPT = f"{CHATML_START}assistant\n"
CONTEXT = 400


@pytest.fixture
async def engine() -> ScriptedEngine:
    return ScriptedEngine(max_prompt_tokens=CONTEXT - 1)


@pytest.fixture
async def worker(
    engine: ScriptedEngine,
) -> AsyncIterator[tuple[InferenceWorker, InMemoryChannelLayer]]:
    layer = InMemoryChannelLayer()
    worker = InferenceWorker(
        engine=engine, transport=Transport(layer=layer), settings=worker_settings(max_active=2)
    )
    async with running(worker):
        yield worker, layer


def question(turn: int) -> str:
    return f"Turn {turn}: " + " ".join(f"detail{turn}-{i}" for i in range(8 + turn % 5))


def request(messages: list[ChatTurn], *, reply: str, turn: int) -> GenerateRequest:
    return GenerateRequest(
        request_id=f"turn-{turn}",
        reply_channel=reply,
        system="You are the support agent.",
        messages=messages,
        sampling=SamplingOptions(max_tokens=40),
        submitted_at=time.time(),
        session_id="conversation-1",
    )


async def test_the_turn_that_trims_finds_its_history_prefilled_when_the_last_answer_ended(
    worker: tuple[InferenceWorker, InMemoryChannelLayer], engine: ScriptedEngine
) -> None:
    _worker, layer = worker
    history: list[ChatTurn] = []
    turn_prompts: list[str] = []
    prefills_before: list[list[str]] = []  # per turn: the trim prefills run since the last turn
    seen = 0
    for turn in range(1, 25):
        messages = [*history, ChatTurn(role="user", content=question(turn))]
        reply = await layer.new_channel()
        await embedded_queue().put(
            REQUEST_CHANNEL, request(messages, reply=reply, turn=turn).to_channel()
        )
        events = await collect(layer, reply)
        assert events[-1].type == "inference.done", events[-1]
        new = engine.requests[seen:]
        seen = len(engine.requests)
        prefills_before.append(
            [r.prompt for r in new if r.request_id.startswith(TRIM_PREFILL_PREFIX)]
        )
        for r in new:
            if r.request_id.startswith(TRIM_PREFILL_PREFIX):
                assert r.priority == BACKGROUND_PRIORITY
                assert r.max_tokens == 1
        turn_prompts.append(next(r.prompt for r in new if r.request_id == f"turn-{turn}"))
        answer = "".join(e.text for e in events if e.type == "inference.delta")
        history = [*messages, ChatTurn(role="assistant", content=answer)]
        await asyncio.sleep(0.1)  # the user reads the answer

    trims = [
        t
        for t in range(1, len(turn_prompts))
        if not turn_prompts[t].startswith(turn_prompts[t - 1].removesuffix(GENERATION_PROMPT))
    ]
    assert len(trims) >= 2, "the conversation never outgrew the context twice"
    for t in trims:
        kept = [
            p.removesuffix(GENERATION_PROMPT)
            for p in prefills_before[t]
            if turn_prompts[t].startswith(p.removesuffix(GENERATION_PROMPT))
        ]
        # the whole history before the question: everything up to the question's own turn
        assert kept, f"turn {t + 1} re-read its trimmed history: nothing prefilled it"
        assert turn_prompts[t].rindex(f"{CHATML_START}user\n") == len(kept[-1])
    # prefills only around trims, not after every answer
    assert sum(map(len, prefills_before)) < len(turn_prompts) // 2


def test_no_trim_prefill_without_a_conversation_or_when_the_next_prompt_is_cached() -> None:
    engine = ScriptedEngine(max_prompt_tokens=CONTEXT - 1)
    builder, defaults = engine.prompt_builder, engine.defaults
    short = [ChatTurn(role="user", content="Where is my parcel?")]
    assert (
        trim_prefill(
            request(short, reply="r", turn=1),
            answer="On its way.",
            builder=builder,
            defaults=defaults,
        )
        is None
    )
    long: list[ChatTurn] = []
    for turn in range(1, 6):  # the 6th question's history is whole, the 7th's will be cut
        long += [
            ChatTurn(role="user", content=question(turn)),
            ChatTurn(role="assistant", content=" ".join(["words"] * 20)),
        ]
    long.append(ChatTurn(role="user", content=question(6)))
    needs = request(long, reply="r", turn=6)
    prefill = trim_prefill(needs, answer="An answer.", builder=builder, defaults=defaults)
    assert prefill is not None
    assert prefill.messages[0].role == "user"
    assert prefill.messages[-1] == ChatTurn(role="assistant", content="An answer.")
    assert prefill.session_id == "conversation-1"
    # the API's requests (no conversation, no trimming) and migrated answers get none
    for other in (
        needs.model_copy(update={"session_id": None}),
        needs.model_copy(update={"trim_history": False}),
        needs.model_copy(update={"continue_from": "An"}),
    ):
        assert trim_prefill(other, answer="An answer.", builder=builder, defaults=defaults) is None
