"""The long-conversation bench's own logic: the cache goal, trim turns, the TTFT goal, the
turns it sends, the options. No model, no engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.long_conversation import (
    FOLLOW_UPS,
    TurnRecord,
    arms,
    cache_goal,
    common_prefix,
    compare_prompts,
    conversation_turns,
    evaluate,
    is_trim,
    miss_cause,
    parse_args,
    trim_cliffs,
    ttft_goal,
)


def turn(
    number: int,
    *,
    prompt: int,
    cached: int,
    answer: int = 64,
    kept_from: int | None = 0,
    ttft_ms: float = 100.0,
    repeat: int = 1,
    reusable: int | None = None,
) -> TurnRecord:
    return TurnRecord(
        repeat=repeat,
        turn=number,
        user_chars=50,
        prompt_tokens=prompt,
        cached_prompt_tokens=cached,
        completion_tokens=answer,
        finish_reason="length",
        ttft_s=ttft_ms / 1000,
        server_ttft_ms=ttft_ms - 20,
        total_s=1.0,
        kept_from=kept_from,
        answer="...",
        reusable_tokens=reusable,
    )


@pytest.mark.parametrize(
    ("prompt", "answer", "block", "goal"),
    [
        (300, 64, 128, 256),  # 364 -> 2 whole blocks
        (320, 64, 128, 384),  # 384 exactly: 3 blocks
        (320, 63, 128, 256),
        (300, 64, 32, 352),
        (10, 5, 128, 0),
    ],
)
def test_the_cache_goal_is_the_previous_prompt_and_answer_in_whole_blocks(
    prompt: int, answer: int, block: int, goal: int
) -> None:
    got = cache_goal(prev_prompt_tokens=prompt, prev_completion_tokens=answer, block_size=block)
    assert got == goal


def test_a_trim_is_the_kept_history_moving_or_without_it_a_prompt_that_shrank() -> None:
    assert not is_trim(prev_kept_from=0, kept_from=0, prev_prompt_tokens=900, prompt_tokens=400)
    assert is_trim(prev_kept_from=0, kept_from=8, prev_prompt_tokens=900, prompt_tokens=950)
    assert is_trim(prev_kept_from=None, kept_from=None, prev_prompt_tokens=900, prompt_tokens=400)
    assert not is_trim(
        prev_kept_from=None, kept_from=None, prev_prompt_tokens=400, prompt_tokens=480
    )
    assert not is_trim(
        prev_kept_from=None, kept_from=None, prev_prompt_tokens=None, prompt_tokens=1
    )


def test_evaluate_checks_every_turn_but_the_first_and_the_trim_turns() -> None:
    records = [
        turn(1, prompt=300, cached=256),
        turn(2, prompt=400, cached=256),  # 300 + 64 -> 256: met
        turn(3, prompt=500, cached=256),  # 400 + 64 -> 384: missed
        turn(4, prompt=350, cached=128, kept_from=6),  # trimmed: not checked
        turn(5, prompt=450, cached=384, kept_from=6),  # 350 + 64 -> 384: met
    ]
    evaluate(records, block_size=128)
    assert [r.expected_cached for r in records] == [None, 256, 384, None, 384]
    assert [r.goal_met for r in records] == [None, True, False, None, True]
    assert [r.trimmed for r in records] == [False, False, False, True, False]
    assert records[2].miss_cause == "cache"


def test_a_miss_says_whether_the_cache_or_the_re_rendered_history_is_short() -> None:
    # previous prompt 320 + answer 64 = 384 = 3 blocks, but its last token never enters the
    # KV cache: 2 blocks is all vLLM can have
    assert (
        miss_cause(
            cached=256,
            prev_prompt_tokens=320,
            prev_completion_tokens=64,
            reusable_tokens=None,
            block_size=128,
        )
        == "boundary"
    )
    # the stored answer re-renders differently after 10 of its tokens: 330 reusable
    assert (
        miss_cause(
            cached=256,
            prev_prompt_tokens=320,
            prev_completion_tokens=100,
            reusable_tokens=330,
            block_size=128,
        )
        == "re-rendered"
    )
    assert (
        miss_cause(
            cached=128,
            prev_prompt_tokens=320,
            prev_completion_tokens=100,
            reusable_tokens=420,
            block_size=128,
        )
        == "cache"
    )


def test_the_ttft_goal_compares_medians_over_repeats() -> None:
    records = [
        turn(2, prompt=1, cached=0, ttft_ms=100, repeat=1),
        turn(2, prompt=1, cached=0, ttft_ms=120, repeat=2),
        turn(2, prompt=1, cached=0, ttft_ms=900, repeat=3),  # an outlier: the median ignores it
        turn(40, prompt=1, cached=0, ttft_ms=150, repeat=1),
        turn(40, prompt=1, cached=0, ttft_ms=150, repeat=2),
        turn(40, prompt=1, cached=0, ttft_ms=160, repeat=3),
    ]
    client = ttft_goal(records, first_turn=2, last_turn=40)
    assert client is not None
    assert client.first_ms == pytest.approx(120)
    assert client.last_ms == pytest.approx(150)
    assert client.ratio == pytest.approx(1.25)
    assert client.met
    worker = ttft_goal(records, first_turn=2, last_turn=40, server=True)
    assert worker is not None
    assert worker.ratio == pytest.approx(130 / 100)
    assert ttft_goal(records, first_turn=2, last_turn=39) is None


def test_common_prefix_counts_equal_tokens_from_the_start() -> None:
    assert common_prefix([1, 2, 3, 4], [1, 2, 9, 4]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([], [1]) == 0


def test_the_conversation_has_40_follow_ups_with_a_long_pasted_log_every_6th_turn() -> None:
    turns = conversation_turns(40, seed=1)
    assert len(FOLLOW_UPS) == 40
    assert turns == conversation_turns(40, seed=1)  # reproducible
    long_turns = [i + 1 for i, text in enumerate(turns) if len(text) > 400]
    assert long_turns == [5, 11, 17, 23, 29, 35]
    # 6-11 log lines of ~50 SmolLM2 tokens (logs are dense: ~2 characters a token)
    assert all(600 <= len(turns[i - 1]) <= 1300 for i in long_turns)
    assert all(6 <= turns[i - 1].count("\n2026-11-29 ") <= 11 for i in long_turns)
    # turns 2 and 40, which the TTFT goal compares, are ordinary short follow-ups
    assert len(turns[1]) < 200
    assert len(turns[39]) < 200
    more = conversation_turns(45, seed=1)
    assert more[40].startswith("(Next day) ")
    assert more[:40] == turns


def test_compare_requests_and_options() -> None:
    kinds = [kind for kind, _ in compare_prompts()]
    assert kinds == ["question"] * 5 + ["story", "code"]
    args: Any = parse_args(["--model-dir", str(Path("no/such/model"))])  # checked in main
    assert (args.turns, args.max_tokens, args.max_model_len, args.block_size) == (
        40,
        64,
        2048,
        None,
    )
    with pytest.raises(SystemExit):
        parse_args(["--block-size", "20"])


def test_a_trim_turn_is_measured_against_the_ordinary_turns_around_it() -> None:
    kept = [0, 0, 0, 0, 6, 6, 6, 10, 10]  # trims at turns 5 and 8
    records = [
        turn(n, prompt=100 * n, cached=0, kept_from=k, ttft_ms=100.0) for n, k in enumerate(kept, 1)
    ]
    records[0].ttft_s = 5.0  # turn 1 (no cache yet) is not one of "the turns around"
    records[4].ttft_s = 0.14
    records[7].ttft_s = 0.9
    records[8].ttft_s = 0.3
    evaluate(records, block_size=128)
    assert [r.turn for r in records if r.trimmed] == [5, 8]
    five, eight = trim_cliffs(records)
    # turn 5: turns 2-4 and 6-7 (8 is a trim turn): all 100 ms
    assert (five.turn, five.around_ms, five.met) == (5, 100.0, True)
    assert five.ratio == pytest.approx(1.4)
    # turn 8: turns 6, 7, 9: 100, 100, 300 ms -> median 100; 900 ms is the cliff
    assert (eight.turn, eight.around_ms, eight.met) == (8, 100.0, False)
    # another repeat's turns are not "around"
    other = turn(7, prompt=1, cached=0, ttft_ms=1.0, repeat=2)
    evaluate([other], block_size=128)
    assert [c.around_ms for c in trim_cliffs([*records, other])] == [100.0, 100.0]


def test_both_arms_alternate_by_repeat() -> None:
    assert arms("both", 4) == [True, False, True, False]
    assert arms("on", 2) == [True, True]
    assert arms("off", 3) == [False, False, False]
    assert parse_args(["--trim-prefill", "both"]).trim_prefill == "both"
    assert parse_args([]).trim_prefill == "on"
