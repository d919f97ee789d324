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
from inference.prompt_builder import (
    BuiltPrompt,
    PromptBuilder,
    cut_points,
    folder_prompt_builder,
    next_cut,
    question_reserve,
    stable_cut,
)
from inference.wire.protocol import ChatTurn

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


# ---- where a trim cuts, and the prefill of the next turn's trimmed prompt -------------------


def test_cut_points_depend_only_on_the_messages_before_them() -> None:
    roles = ["user", "assistant"] * 10
    tokens = [30, 50] * 10
    points = cut_points(roles, tokens, step=100)
    assert points[0] == 0
    assert all(roles[p] == "user" for p in points[1:])
    # a longer conversation keeps every point of a shorter one
    for length in range(1, len(roles)):
        assert cut_points(roles[:length], tokens[:length], step=100) == [
            p for p in points if p < length
        ]


def test_the_stable_cut_leaves_room_for_a_question_and_moves_only_forward() -> None:
    budget, fixed, step = 400, 20, 200
    reserve = question_reserve(budget)
    assert reserve == 100
    roles: list[str] = []
    tokens: list[int] = []
    cuts = []
    for _ in range(30):
        roles += ["user", "assistant"]
        tokens += [25, 40]
        cut = stable_cut(roles, tokens, fixed=fixed, budget=budget, step=step)
        assert cut is not None
        assert fixed + sum(tokens[cut:]) + reserve <= budget
        cuts.append(cut)
    assert cuts[0] == 0  # short: the whole history
    assert cuts == sorted(cuts)
    assert 2 <= len(set(cuts)) <= 30 // 3  # in large steps
    # no cut point leaves the reserve: none
    assert (
        stable_cut(["user", "assistant"], [10, 350], fixed=fixed, budget=budget, step=step) is None
    )


def test_next_cut_is_only_a_cut_no_earlier_prompt_started_at() -> None:
    roles = ["user", "assistant"] * 8
    tokens = [25, 40] * 8
    cut = stable_cut(roles, tokens, fixed=20, budget=400, step=200)
    assert cut not in (None, 0)
    assert next_cut(roles, tokens, fixed=20, budget=400, step=200, current=0) == cut
    assert next_cut(roles, tokens, fixed=20, budget=400, step=200, current=cut) is None
    short = roles[:4], tokens[:4]
    assert next_cut(*short, fixed=20, budget=400, step=200, current=0) is None


def _words(count: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(count))


def test_the_turn_after_an_answer_starts_at_the_cut_prefilled_when_the_answer_ended() -> None:
    """The no-cliff rule: whenever a turn's history starts at a new cut, that history was
    known when the previous answer ended (`next_history`), and the prompt prefilled then is
    this turn's prompt up to its question: vLLM finds it all in the prefix cache. And a
    history is prefilled only for the turn that then starts at it."""
    builder = _builder(800)
    max_tokens = 100
    history: list[ChatTurn] = []
    prefilled: BuiltPrompt | None = None  # what the worker prefilled after the last answer
    starts = []
    for i in range(60):
        # questions of 5-60 words (the reserve is a quarter of the 692-token budget)
        question = ChatTurn(role="user", content=_words(5 + (i * 37) % 56, f"q{i}w"))
        messages = [*history, question]
        built = builder.build(system=SYSTEM, messages=messages, max_tokens=max_tokens, trim=True)
        starts.append(built.kept_from)
        if len(starts) > 1 and built.kept_from != starts[-2]:  # a trim turn
            assert prefilled is not None, f"turn {i} trimmed at a cut nobody prefilled"
            kept_history = builder.render(
                system=SYSTEM, messages=messages[built.kept_from : -1], add_generation_prompt=False
            )[1]
            assert prefilled.token_ids[: len(kept_history)] == kept_history
            assert built.token_ids[: len(kept_history)] == kept_history
        else:  # a question within the reserve takes the cut prefilled for it: none is wasted
            assert prefilled is None, f"turn {i} did not use the cut prefilled for it"
        answer = _words(10 + (i * 29) % 120, f"a{i}w")  # answers of 10-129 words
        after = builder.next_history(
            system=SYSTEM, messages=messages, answer=answer, max_tokens=max_tokens
        )
        prefilled = (
            None
            if after is None
            else builder.build(system=SYSTEM, messages=after, max_tokens=1, trim=True)
        )
        if prefilled is not None:
            assert prefilled.kept_from == 0  # the prefill prompt is that history, as it is
        history = [*messages, ChatTurn(role="assistant", content=answer)]
    assert len(set(starts)) >= 4, starts  # it did trim, several times
    assert starts == sorted(starts)


def test_a_question_longer_than_the_reserve_cuts_further_and_still_fits() -> None:
    builder = _builder(600)
    history = _conversation(6)  # 12 messages, 28 tokens each: fits with room to spare
    short = builder.build(system=SYSTEM, messages=_next_turn(history, 0), max_tokens=100, trim=True)
    assert short.kept_from == 0
    long_question = ChatTurn(role="user", content=_words(300, "paste"))
    built = builder.build(
        system=SYSTEM, messages=[*history, long_question], max_tokens=100, trim=True
    )
    assert 0 < built.kept_from < len(history)
    assert len(built.token_ids) <= 600 - 100 - 8


def _trimmed_then_continued(
    so_far: str, *, continued_tokens: int
) -> tuple[list[ChatTurn], BuiltPrompt, BuiltPrompt]:
    """A 13th question after 12 turns in a 600-token window, with a 200-token answer: its
    messages, its first (trimmed) prompt, and the prompt that goes on after `so_far`, of which
    `continued_tokens` were generated."""
    builder = _builder(600)
    messages = _next_turn(_conversation(12), 12)
    first = builder.build(system=SYSTEM, messages=messages, max_tokens=200, trim=True)
    going_on = builder.build_continuation(
        system=SYSTEM,
        messages=messages,
        answer_so_far=so_far,
        max_tokens=200,
        continued_tokens=continued_tokens,
        trim=True,
    )
    return messages, first, going_on


def test_a_moved_answer_in_a_trimmed_conversation_keeps_its_window_and_fits() -> None:
    """Issue 31 defect 5: the continuation of an answer in a long, trimmed conversation was cut
    for the tokens left to the answer (more room: an earlier, longer window than the first
    worker's), so with the text so far it no longer fit and was refused `too_long` half-way.
    It keeps the first worker's window (cut for the whole answer's budget), fits, and gets
    the rest of the budget."""
    so_far = " ".join(f"s{i}" for i in range(180))  # 180 of its 200 tokens were streamed
    _, first, going_on = _trimmed_then_continued(so_far, continued_tokens=180)
    assert first.kept_from > 0  # trimmed
    assert going_on.kept_from == first.kept_from
    assert going_on.text.startswith(first.text)
    assert going_on.text.endswith(so_far)
    assert going_on.max_tokens == 20
    assert len(going_on.token_ids) + going_on.max_tokens <= 600


def test_a_continuation_that_outgrows_its_window_drops_more_history_not_the_answer() -> None:
    """Re-encoded, the text so far can take more tokens than were generated: the window then
    starts at a later question rather than the answer being refused."""
    so_far = " ".join(f"s{i}" for i in range(400))  # far more than the 200 it was allowed
    messages, first, going_on = _trimmed_then_continued(so_far, continued_tokens=199)
    assert going_on.kept_from > first.kept_from
    assert messages[going_on.kept_from].role == "user"
    assert going_on.text.endswith(so_far)
    assert len(going_on.token_ids) < 600
    assert going_on.max_tokens == 1
