"""bench.dtype_ttft's pure parts: the probe's size, the run order, the per-request ITL and
the table's ratio against vLLM's server at its best dtype."""

from __future__ import annotations

import pytest

from bench.dtype_ttft import (
    Config,
    markdown_table,
    parse_variant,
    plan,
    request_itl_s,
    size_system_prompt,
    summarize,
)
from bench.load.results import Outcome


def fake_tokens(system: str, question: str) -> list[int]:
    """One token per word: a 3-token header, the system words, a user header, the question."""
    return [0, 0, 0, *(int(w[1:]) for w in system.split()), -1, *(-ord(w) for w in question)]


WORDS = [f"w{i}" for i in range(200)]


def test_the_probe_shares_exactly_the_cached_blocks_and_reaches_the_prompt_size() -> None:
    system = size_system_prompt(
        words=WORDS, questions=["abc", "def"], cached=64, tokens_of=fake_tokens, total=80
    )
    prompt = fake_tokens(system, "abc")
    shared = 3 + len(system.split()) + 1  # header, system, the user header token
    assert 64 <= shared < 96  # 2 blocks of 32 cached, not 3
    assert len(prompt) == 80


def test_without_a_total_the_system_prompt_is_the_shortest_that_fills_the_blocks() -> None:
    system = size_system_prompt(words=WORDS, questions=["a", "b"], cached=64, tokens_of=fake_tokens)
    assert 3 + len(system.split()) + 1 == 64


def test_a_prompt_too_short_to_cache_is_refused() -> None:
    with pytest.raises(ValueError, match="share only"):
        size_system_prompt(words=WORDS[:10], questions=["a", "b"], cached=64, tokens_of=fake_tokens)


def test_every_config_runs_each_round_in_alternating_order() -> None:
    order = plan(
        targets=["app", "vllm"],
        dtypes=["bfloat16", "float32"],
        variants=[
            parse_variant("tcmalloc:LD_PRELOAD=/x.so"),
            parse_variant("nofaq@app:INFERENCE_FAQ=0"),
        ],
        rounds=2,
    )
    first = [c.key for r, c in order if r == 0]
    second = [c.key for r, c in order if r == 1]
    assert len(first) == 10  # 2 targets x 2 dtypes x (default, tcmalloc) + app x 2 dtypes
    assert second == first[::-1]
    assert first[0] == "app-bfloat16-default"
    assert {c.env.get("LD_PRELOAD") for _, c in order if c.variant == "tcmalloc"} == {"/x.so"}
    assert {c.target for _, c in order if c.variant == "nofaq"} == {"app"}


@pytest.mark.parametrize(
    ("raw", "name", "env", "target"),
    [
        ("tcmalloc:LD_PRELOAD=/a.so", "tcmalloc", {"LD_PRELOAD": "/a.so"}, None),
        (
            "bind:VLLM_CPU_OMP_THREADS_BIND=0-1;VLLM_CPU_NUM_OF_RESERVED_CPU=0",
            "bind",
            {"VLLM_CPU_OMP_THREADS_BIND": "0-1", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"},
            None,
        ),
        ("nofaq@app:INFERENCE_FAQ=0", "nofaq", {"INFERENCE_FAQ": "0"}, "app"),
        ("plain:", "plain", {}, None),
    ],
)
def test_variants_parse(raw: str, name: str, env: dict[str, str], target: str | None) -> None:
    variant = parse_variant(raw)
    assert (variant.name, dict(variant.env), variant.target) == (name, env, target)


@pytest.mark.parametrize("raw", ["noname", "default:A=1", "x:A", "x@web:A=1"])
def test_bad_variants_are_refused(raw: str) -> None:
    with pytest.raises(ValueError, match="variant"):
        parse_variant(raw)


def outcome(ttft: float, gaps: list[float], tokens: int, source: str = "model") -> Outcome:
    return Outcome(
        index=0,
        kind="free",
        scheduled_s=0.0,
        status="ok",
        ttft_s=ttft,
        itl_s=gaps,
        completion_tokens=tokens,
        source=source,
        prompt_tokens=343,
        cached_prompt_tokens=320,
    )


def test_itl_counts_tokens_not_coalesced_pieces() -> None:
    # 16 tokens in 3 pieces (the app coalesces): 15 tokens after the first in 0.3 s
    assert request_itl_s(outcome(0.2, [0.1, 0.2], 16)) == pytest.approx(0.02)
    assert request_itl_s(outcome(0.2, [], 1)) is None


def test_faq_answers_and_errors_are_left_out_and_counted() -> None:
    failed = Outcome(index=1, kind="free", scheduled_s=0.0, status="error")
    s = summarize(
        Config(target="app", dtype="bfloat16"),
        [outcome(0.2, [0.1], 2), outcome(0.01, [0.1], 2, source="faq"), failed],
    )
    assert s.ttft_ms == [pytest.approx(200.0)]
    assert s.skipped == 2


def test_the_table_compares_with_vllm_at_its_best_dtype() -> None:
    summaries = [
        summarize(Config(target="app", dtype="float32"), [outcome(0.2, [0.1], 2)]),
        summarize(Config(target="vllm", dtype="bfloat16"), [outcome(0.6, [0.1], 2)]),
        summarize(Config(target="vllm", dtype="float32"), [outcome(0.16, [0.1], 2)]),
    ]
    rows = markdown_table(summaries).splitlines()[2:]
    assert rows[0].startswith("| this product, float32 | 200 ms |")
    assert rows[0].endswith("| 1.25x |")
    assert rows[2].startswith("| vLLM's server, float32 (best) | 160 ms |")
    assert rows[1].endswith("| 3.75x |")
