"""History that fits the context and stays a cached prefix (`inference/prompt_builder.py`).

Counted with the scripted engine's builder (ChatML layout, a token is a word), so the numbers
are easy to follow; the real tokenizers go through the same code.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from inference.engines.base import PromptTooLongError
from inference.engines.scripted import ScriptedEngine
from inference.prompt_builder import BuiltPrompt, PromptBuilder, folder_prompt_builder
from inference.protocol import ChatTurn

SYSTEM = "You are the support agent."


def _conversation(turns: int, *, words: int = 20) -> list[ChatTurn]:
    messages = []
    for i in range(turns):
        messages.append(ChatTurn(role="user", content=" ".join(f"q{i}w{j}" for j in range(words))))
        messages.append(
            ChatTurn(role="assistant", content=" ".join(f"a{i}w{j}" for j in range(words)))
        )
    return messages


def _builder(context: int) -> PromptBuilder:
    engine = ScriptedEngine(max_prompt_tokens=context - 1)
    return engine.prompt_builder


def _next_turn(history: list[ChatTurn], i: int) -> list[ChatTurn]:
    return [*history, ChatTurn(role="user", content=f"question {i}")]


def test_a_short_conversation_is_sent_whole() -> None:
    built = _builder(4000).build(
        system=SYSTEM, messages=_conversation(3), max_tokens=100, trim=True
    )
    assert built.kept_from == 0
    assert built.text.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\nq0w0")
    assert built.max_tokens == 100


def test_a_long_conversation_is_trimmed_in_steps_and_the_start_stays_put() -> None:
    builder = _builder(600)
    history: list[ChatTurn] = []
    starts: list[int] = []
    built: BuiltPrompt | None = None
    for i in range(40):
        messages = _next_turn(history, i)
        built = builder.build(system=SYSTEM, messages=messages, max_tokens=100, trim=True)
        assert len(built.token_ids) <= 600 - 100
        # never split a message, never drop the system prompt, always start with a user turn
        assert built.text.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n")
        assert messages[built.kept_from].role == "user"
        starts.append(built.kept_from)
        history = [*messages, ChatTurn(role="assistant", content=" ".join(["ok"] * 20))]
    assert built is not None
    assert built.kept_from > 0  # it did have to trim
    changes = sum(1 for a, b in itertools.pairwise(starts) if a != b)
    # large steps: the kept history moved a few times in 40 turns, not on every turn
    assert 1 <= changes <= 40 // 4, starts
    assert starts == sorted(starts)


def test_only_a_last_message_that_cannot_fit_alone_is_refused() -> None:
    builder = _builder(200)
    huge = ChatTurn(role="user", content=" ".join(["word"] * 300))
    with pytest.raises(PromptTooLongError):
        builder.build(system=SYSTEM, messages=[*_conversation(2), huge], max_tokens=50, trim=True)
    # one that fits alone is answered, with the answer budget capped to what is left
    big = ChatTurn(role="user", content=" ".join(["word"] * 170))
    built = builder.build(
        system=SYSTEM, messages=[*_conversation(2), big], max_tokens=50, trim=True
    )
    assert built.kept_from == 4
    assert 1 <= built.max_tokens < 50


def test_without_trimming_a_conversation_over_the_context_is_refused() -> None:
    builder = _builder(200)
    with pytest.raises(PromptTooLongError):
        builder.build(system=SYSTEM, messages=_conversation(10), max_tokens=10, trim=False)


def test_a_migrated_answer_goes_on_inside_the_open_assistant_turn(tiny_dir: Path) -> None:
    """The prompt of an answer another engine began ends with the text the user saw (its
    trailing space too), inside the assistant turn: no end-of-turn, no new generation prompt,
    and everything before it is the normal prompt's prefix (the history stays cached)."""
    builder = folder_prompt_builder(model_dir=tiny_dir, context_tokens=2048)
    history = [ChatTurn(role="user", content="Where is my parcel?")]
    fresh = builder.build(system="Be brief.", messages=history, max_tokens=64, trim=True)
    so_far = "Your parcel left the warehouse on Monday and "
    going_on = builder.build_continuation(
        system="Be brief.", messages=history, answer_so_far=so_far, max_tokens=64, trim=True
    )
    assert going_on.text.endswith(so_far)
    assert going_on.text.startswith(fresh.text)  # the fresh prompt ends with the assistant tag
    assert going_on.token_ids[: len(fresh.token_ids)] == fresh.token_ids
    assert len(going_on.token_ids) > len(fresh.token_ids)
