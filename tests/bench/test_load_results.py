"""The load benchmark's numbers: per-point statistics, keep-up, sustained rate, the goals."""

from __future__ import annotations

import dataclasses
import math

import pytest

from bench.load.__main__ import parse_args
from bench.load.report import goals_markdown, points_table
from bench.load.results import (
    Outcome,
    PointSummary,
    Quantiles,
    goal_p99_vs_baseline,
    goal_sustained,
    goal_vs_vllm,
    summarise,
    sustained_rate,
)
from bench.load.targets import parse_prefix_cache_counters


def answered(
    index: int, *, sent: float, ttft: float, e2e: float, kind: str = "free", **extra: object
) -> Outcome:
    outcome = Outcome(index=index, kind=kind, scheduled_s=sent, sent_s=sent, status="ok")
    outcome.ttft_s, outcome.e2e_s = ttft, e2e
    for key, value in extra.items():
        setattr(outcome, key, value)
    return outcome


def test_a_point_counts_hits_errors_busy_and_cached_tokens() -> None:
    outcomes = [
        answered(0, sent=0.0, ttft=0.02, e2e=0.03, kind="faq", source="faq"),
        answered(
            1,
            sent=1.0,
            ttft=0.5,
            e2e=1.5,
            kind="faq",
            source="model",
            prompt_tokens=200,
            cached_prompt_tokens=128,
            completion_tokens=11,
            itl_s=[0.1, 0.1],
        ),
        answered(
            2,
            sent=2.0,
            ttft=0.3,
            e2e=0.8,
            kind="template",
            source="model",
            prompt_tokens=400,
            cached_prompt_tokens=384,
            completion_tokens=21,
        ),
        Outcome(index=3, kind="free", scheduled_s=3.0, sent_s=3.0, status="busy"),
        Outcome(index=4, kind="free", scheduled_s=4.0, sent_s=4.0, status="error"),
    ]
    point = summarise(outcomes, config="full", load=1.0, offered_rate=1.0)
    assert (point.requests, point.ok, point.busy, point.errors) == (5, 3, 1, 1)
    assert (point.faq_requests, point.faq_hits, point.other_faq_answers) == (2, 1, 0)
    # FAQ answers run no model: left out of the prefix-cache rate and of "model-answered"
    assert point.prefix_cache_hit_rate == pytest.approx((128 + 384) / 600)
    assert point.ttft_model.p50 == pytest.approx(0.4)
    assert point.ttft.p50 == pytest.approx(0.3)
    # first send 0.0 .. last done 2.8: 3 answers, 32 model tokens
    assert point.request_throughput == pytest.approx(3 / 2.8)
    assert point.output_tokens_per_s == pytest.approx(32 / 2.8)
    # per token after the first: (1.5 - 0.5) / 10 and (0.8 - 0.3) / 20
    assert point.tpot.p50 == pytest.approx((0.1 + 0.025) / 2)


def test_server_counters_replace_the_usage_when_given() -> None:
    outcomes = [answered(0, sent=0, ttft=0.1, e2e=0.2, prompt_tokens=100, cached_prompt_tokens=0)]
    point = summarise(outcomes, config="vllm", load=1, offered_rate=1, prefix_cache=(64, 256))
    assert point.prefix_cache_hit_rate == 0.25
    assert point.prefix_cache_source == "server /metrics"


def test_keep_up_tells_a_system_that_keeps_up_from_one_that_falls_behind() -> None:
    keeping = [answered(i, sent=i * 0.5, ttft=0.1, e2e=0.3) for i in range(10)]
    behind = [answered(i, sent=i * 0.5, ttft=0.1, e2e=0.3 + i * 0.4) for i in range(10)]
    refused = keeping[:5] + [
        Outcome(index=i, kind="free", scheduled_s=i * 0.5, sent_s=i * 0.5, status="busy")
        for i in range(5, 10)
    ]
    # the near-idle E2E (0.3 s) is the lowest rate's; queueing must not raise the bar
    fast = summarise(keeping, config="a", load=2.0, offered_rate=2.0, idle_e2e_s=0.3)
    slow = summarise(behind, config="a", load=2.0, offered_rate=2.0, idle_e2e_s=0.3)
    half = summarise(refused, config="a", load=2.0, offered_rate=2.0, idle_e2e_s=0.3)
    assert fast.keep_up == pytest.approx(1.0)
    assert slow.keep_up < 0.6  # last done at 4.5 + 3.9 s instead of 4.5 + 0.3 s
    assert half.keep_up == pytest.approx(0.5)
    assert math.isnan(summarise(keeping, config="a", load=4, offered_rate=None).keep_up)


def point(
    config: str, load: float, *, p50: float, p95: float, p99: float, keep: float = 1.0
) -> PointSummary:
    q = Quantiles(p50=p50, p95=p95, p99=p99)
    base = summarise(
        [answered(0, sent=0, ttft=p50, e2e=p50)], config=config, load=load, offered_rate=None
    )
    return dataclasses.replace(base, ttft=q, ttft_model=q, keep_up=keep)


def test_the_sustained_rate_is_the_highest_rate_within_target_that_keeps_up() -> None:
    points = [
        point("full", 0.5, p50=0.1, p95=0.3, p99=0.4),
        point("full", 1, p50=0.2, p95=0.9, p99=1.2),
        point("full", 2, p50=0.3, p95=1.5, p99=2.0, keep=0.7),  # fell behind
        point("full", 4, p50=3.0, p95=9.0, p99=9.9),
    ]
    assert sustained_rate(points, ttft_target_s=1.0) == 1
    assert sustained_rate(points, ttft_target_s=0.1) is None


def test_goals_are_judged_from_the_numbers() -> None:
    points = [
        point("full", 1, p50=0.10, p95=0.20, p99=0.3),
        point("full", 4, p50=0.20, p95=0.50, p99=0.6),
        point("baseline", 1, p50=0.30, p95=1.50, p99=2.0),
        point("baseline", 4, p50=2.00, p95=5.00, p99=6.0),
        point("vllm", 1, p50=0.095, p95=0.19, p99=0.3),
        point("vllm", 4, p50=0.15, p95=0.40, p99=0.5),
    ]
    assert goal_vs_vllm(points).verdict == "missed"  # 0.20 / 0.15 at load 4
    assert goal_vs_vllm(points[:2] + points[4:5]).verdict == "met"
    assert goal_p99_vs_baseline(points).verdict == "met"  # 6.7x and 10x
    sustained = goal_sustained(points, ttft_target_s=1.0)
    assert sustained.verdict == "not measured"  # baseline sustains none of the rates
    sustained = goal_sustained(points, ttft_target_s=1.6)
    assert sustained.verdict == "met"  # 4 vs 1 req/s; full sustained the top rate, so >= 4x
    assert "lower bound" in sustained.detail
    assert goal_vs_vllm(points[:2]).verdict == "not measured"
    text = goals_markdown(points, ttft_target_s=1.6)
    assert "full 4 req/s" in text
    assert "baseline 1 req/s" in text
    assert points_table(points).count("\n| full |") == 2


def test_prefix_cache_counters_are_read_from_vllm_metrics() -> None:
    text = (
        "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of tokens.\n"
        "# TYPE vllm:prefix_cache_hits_total counter\n"
        'vllm:prefix_cache_hits_total{engine="0",model_name="bench"} 384.0\n'
        'vllm:prefix_cache_queries_total{engine="0",model_name="bench"} 1024.0\n'
        'vllm:prefix_cache_queries_created{engine="0",model_name="bench"} 1.7e9\n'
    )
    assert parse_prefix_cache_counters(text) == (384.0, 1024.0)
    assert parse_prefix_cache_counters("# nothing here\n") is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--configs", "full,fast"], "unknown config"),
        (["--rates", "1,zero"], "--rates"),
        (["--rates", "1", "--concurrency", "2"], "not allowed with"),
        (["--concurrency", "1.5"], "whole numbers"),
        (["--configs", "external"], "--external-url"),
        (["--mix", "faq=1,chat=2"], "mix"),
        (["--model-dir", "/nonexistent"], "not a prepared model"),
    ],
)
def test_bad_command_lines_are_refused_with_a_reason(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert message in capsys.readouterr().err
