"""The load run: for each configuration, start it, warm it up, sweep the loads, stop it."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from bench import harness
from bench.load.clients import run_closed_loop, run_open_loop, sequential
from bench.load.report import goals, goals_markdown, plot, points_table
from bench.load.results import Outcome, PointSummary, summarise, sustained_by_config
from bench.load.targets import CONFIG_LABELS, RunOptions, Target, engine_settings, started
from bench.load.workload import (
    Kind,
    WorkItem,
    describe_mix,
    make_items,
    point_seed,
    poisson_offsets,
)
from bench.prompts import BenchSampling

MODULE = "bench.load"
WARMUP_POINT = 999  # the warm-up's own seed, never a sweep point's


async def measure_point(
    target: Target,
    *,
    items: Sequence[WorkItem],
    load: float,
    closed_loop: bool,
    seed: int,
    bar: tqdm[Any],
) -> tuple[list[Outcome], tuple[float, float] | None]:
    """One point's outcomes, and the server's prefix-cache counter deltas (if it has any)."""
    before = await target.prefix_cache_counters() if target.prefix_cache_counters else None

    def on_done(outcome: Outcome) -> None:
        bar.update(1)
        bar.set_postfix_str(f"load {load:g}, last TTFT {outcome.ttft_s or math.nan:.2f}s")

    if closed_loop:
        outcomes = await run_closed_loop(
            target.client, items, concurrency=int(load), on_done=on_done
        )
    else:
        offsets = poisson_offsets(seed=seed, count=len(items), rate=load)
        outcomes = await run_open_loop(target.client, items, offsets, on_done=on_done)
    after = await target.prefix_cache_counters() if target.prefix_cache_counters else None
    delta = None
    if before is not None and after is not None:
        delta = (after[0] - before[0], after[1] - before[1])
    return outcomes, delta


async def run_config(
    name: str,
    *,
    args: argparse.Namespace,
    options: RunOptions,
    mix: Mapping[Kind, float],
) -> dict[str, Any]:
    loads: list[float] = args.loads
    total = args.warmup + args.requests * len(loads)
    record: dict[str, Any] = {"config": name, "label": CONFIG_LABELS[name], "points": []}
    record["load_average_before"] = harness.load_average()
    print(f"\n==> {name}: {CONFIG_LABELS[name]}", flush=True)
    async with started(name, options=options) as target:
        record["startup_s"] = round(target.startup_s, 1)
        record["server_log"] = str(target.log_path) if target.log_path else None
        print(f"    ready in {target.startup_s:.0f} s", flush=True)
        with tqdm(total=total, desc=name, unit="req", dynamic_ncols=True) as bar:
            warm_items = make_items(
                seed=point_seed(args.seed, WARMUP_POINT), count=args.warmup, mix=mix
            )
            warm = await sequential(target.client, warm_items)
            bar.update(len(warm))
            record["warmup"] = [o.to_json() for o in warm]
            idle_e2e_s: float | None = None  # the lowest rate's P95 E2E, for keep-up
            for number, load in enumerate(loads):
                seed = point_seed(args.seed, number)
                items = make_items(seed=seed, count=args.requests, mix=mix)
                await asyncio.sleep(args.pause)
                started_at = time.monotonic()
                outcomes, counters = await measure_point(
                    target,
                    items=items,
                    load=load,
                    closed_loop=args.closed_loop,
                    seed=seed,
                    bar=bar,
                )
                summary = summarise(
                    outcomes,
                    config=name,
                    load=load,
                    offered_rate=None if args.closed_loop else load,
                    prefix_cache=counters,
                    idle_e2e_s=idle_e2e_s,
                )
                if idle_e2e_s is None:
                    idle_e2e_s = summary.e2e.p95
                record["points"].append(
                    {
                        "load": load,
                        "wall_s": round(time.monotonic() - started_at, 2),
                        "load_average_after": harness.load_average(),
                        "summary": summary.to_json(),
                        "outcomes": [o.to_json() for o in outcomes],
                    }
                )
    record["load_average_after"] = harness.load_average()
    return record


def summaries_of(records: Sequence[Mapping[str, Any]]) -> list[PointSummary]:
    from bench.load.results import Quantiles

    out = []
    for record in records:
        for point in record.get("points", []):
            data = dict(point["summary"])
            for key in ("ttft", "itl", "tpot", "e2e", "ttft_model"):
                data[key] = Quantiles(**data[key])
            out.append(PointSummary(**data))
    return out


def outcomes_of(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[float, list[Outcome]]]:
    by_config: dict[str, dict[float, list[Outcome]]] = {}
    for record in records:
        for point in record.get("points", []):
            by_config.setdefault(record["config"], {})[point["load"]] = [
                Outcome(**{k: v for k, v in o.items() if k != "tpot_s"}) for o in point["outcomes"]
            ]
    return by_config


def same_answers(
    outcomes: Mapping[str, Mapping[float, Sequence[Outcome]]], *, a: str, b: str
) -> str | None:
    """How many model-answered requests got the same prompt length and text from `a` and `b`."""
    if a not in outcomes or b not in outcomes:
        return None
    pairs = []
    for load, mine in outcomes[a].items():
        theirs = {o.index: o for o in outcomes[b].get(load, [])}
        for o in mine:
            other = theirs.get(o.index)
            if other and o.status == other.status == "ok" and "faq" not in (o.source, other.source):
                pairs.append((o, other))
    if not pairs:
        return None
    prompt = sum(1 for x, y in pairs if x.prompt_tokens == y.prompt_tokens)
    text = sum(1 for x, y in pairs if x.answer.strip() == y.answer.strip())
    return (
        f"{a} vs {b}, requests both answered with the model: same prompt token count "
        f"{prompt}/{len(pairs)}, same answer text {text}/{len(pairs)}"
    )


def expected_prompt_tokens(
    args: argparse.Namespace, *, mix: Mapping[Kind, float]
) -> dict[float, dict[int, int]]:
    """Per load and request index, the prompt tokens the app's worker builds for it (the model
    folder's tokenizer and chat template, offline): what every configuration should report."""
    from bench.prompts import tokenizer_prompt_builder

    settings = engine_settings(model_dir=args.model_dir)
    builder = tokenizer_prompt_builder(args.model_dir, context_tokens=settings.max_model_len)
    expected: dict[float, dict[int, int]] = {}
    for number, load in enumerate(args.loads):
        items = make_items(seed=point_seed(args.seed, number), count=args.requests, mix=mix)
        expected[load] = {
            item.index: len(item.prompt(builder, max_tokens=args.max_tokens).token_ids)
            for item in items
        }
    return expected


def prompt_token_check(
    outcomes: Mapping[str, Mapping[float, Sequence[Outcome]]],
    *,
    expected: Mapping[float, Mapping[int, int]],
) -> list[str]:
    """Per configuration: model-answered requests whose reported prompt tokens equal what the
    worker's prompt builder gives offline."""
    lines = []
    for config, by_load in outcomes.items():
        checked = same = 0
        for load, mine in by_load.items():
            for o in mine:
                want = expected.get(load, {}).get(o.index)
                if o.status != "ok" or o.source == "faq" or o.prompt_tokens is None or want is None:
                    continue
                checked += 1
                same += o.prompt_tokens == want
        if checked:
            lines.append(
                f"{config}: prompt tokens equal to the worker's own prompt builder (offline) "
                f"{same}/{checked}"
            )
    return lines


def paired_ttft(
    outcomes: Mapping[str, Mapping[float, Sequence[Outcome]]], *, a: str, b: str
) -> str | None:
    """Median per-request TTFT ratio a/b over the requests both answered with the model: the
    same prompts, so it isolates the path (the FAQ cache's hits are left out)."""
    if a not in outcomes or b not in outcomes:
        return None
    parts = []
    for load, mine in sorted(outcomes[a].items()):
        theirs = {o.index: o for o in outcomes[b].get(load, [])}
        ratios = [
            o.ttft_s / other.ttft_s
            for o in mine
            if (other := theirs.get(o.index)) is not None
            and o.ttft_s is not None
            and other.ttft_s
            and "faq" not in (o.source, other.source)
        ]
        if ratios:
            parts.append(f"{load:g}: {harness.median(ratios):.2f}x (n={len(ratios)})")
    if not parts:
        return None
    return f"TTFT {a}/{b}, median of per-request ratios, model-answered only: " + "; ".join(parts)


def app_split(
    outcomes: Mapping[str, Mapping[float, Sequence[Outcome]]], *, config: str
) -> str | None:
    """Where a model answer's TTFT goes inside the app (medians per load): waiting for a
    worker (`queue_wait_ms`), the worker's own TTFT (FAQ lookup + engine), and the rest
    (consumer, database, channel layer, socket)."""
    parts = []
    for load, mine in sorted(outcomes.get(config, {}).items()):
        rows = [
            (o.ttft_s * 1000, o.queue_wait_ms, o.server_ttft_ms)
            for o in mine
            if o.status == "ok"
            and o.source == "model"
            and o.ttft_s is not None
            and o.queue_wait_ms is not None
            and o.server_ttft_ms is not None
        ]
        if rows:
            wait = harness.median([r[1] for r in rows])
            worker = harness.median([r[2] for r in rows])
            rest = harness.median([r[0] - r[1] - r[2] for r in rows])
            parts.append(f"{load:g}: queue {wait:.0f}, worker {worker:.0f}, rest {rest:.0f}")
    if not parts:
        return None
    return f"{config}, model answers, TTFT split (median ms): " + "; ".join(parts)


def markdown(
    *,
    args: argparse.Namespace,
    records: Sequence[Mapping[str, Any]],
    points: Sequence[PointSummary],
    plots: Sequence[Path],
    mix: Mapping[Kind, float],
    stamp: str,
) -> str:
    load_name = "concurrency" if args.closed_loop else "offered rate (req/s)"
    settings = engine_settings(model_dir=args.model_dir)
    first_load = records[0]["load_average_before"] if records else "-"
    lines = [
        f"# Load benchmark {stamp}",
        "",
        f"- machine: {harness.machine()}; load average (1/5/15 min) at start {first_load}",
        f"- model: `{args.model_dir}`; engine: max_num_seqs {settings.max_num_seqs}, "
        f"max_num_batched_tokens {settings.max_num_batched_tokens}, max_model_len "
        f"{settings.max_model_len}, KV cache {settings.kv_cache_gib:g} GiB, eager "
        f"{settings.enforce_eager}, block size {settings.block_size or 'vLLM default'}",
        f"- sampling, the same for every configuration (the model's generation_config.json, "
        f"sent explicitly): {args.sampling.describe()}",
        f"- command: `{harness.command_line(module=MODULE)}`",
        f"- workload: {describe_mix(mix)}; seed {args.seed}; {args.requests} requests per point "
        f"after {args.warmup} sequential warm-up requests per configuration; "
        + (
            "closed loop (a fixed number in flight)"
            if args.closed_loop
            else "Poisson arrivals (exponential gaps rescaled to the exact mean)"
        ),
        f"- TTFT target for the sustained rate: {args.ttft_target_s:g} s",
        "",
    ]
    for record in records:
        extra = (
            f"ready in {record.get('startup_s', '-')} s, load average before / after "
            f"{record.get('load_average_before')} / {record.get('load_average_after', '-')}"
        )
        if record.get("error"):
            extra = f"FAILED: {record['error']}"
        lines.append(f"- `{record['config']}`: {record['label']}; {extra}")
    lines += ["", f"Load = {load_name}.", "", points_table(points), ""]
    if not args.closed_loop:
        lines += ["## Goals", "", goals_markdown(points, ttft_target_s=args.ttft_target_s), ""]
    outcomes = outcomes_of(records)
    checks = [
        same_answers(outcomes, a="full", b="vllm"),
        same_answers(outcomes, a="baseline", b="vllm"),
        same_answers(outcomes, a="nofaq", b="vllm"),
        *(paired_ttft(outcomes, a=a, b="vllm") for a in ("full", "nofaq", "baseline")),
        *(app_split(outcomes, config=c) for c in ("full", "nofaq", "baseline")),
    ]
    lines += [f"- {c}" for c in checks if c]
    try:
        expected = expected_prompt_tokens(args, mix=mix)
    except Exception as exc:  # a report without this check beats no report
        lines.append(f"- prompt tokens vs the worker's prompt builder: not checked ({exc!r})")
    else:
        lines += [f"- {c}" for c in prompt_token_check(outcomes, expected=expected)]
    lines += [f"- plot: `{p.name}`" for p in plots]
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> int:
    from bench.load.workload import parse_mix

    mix = parse_mix(args.mix)
    stamp = harness.timestamp()
    harness.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stem = harness.RESULTS_DIR / f"load-{stamp}"
    args.sampling = BenchSampling.of_model_dir(args.model_dir, max_tokens=args.max_tokens)
    args.max_tokens = args.sampling.max_tokens
    options = RunOptions(
        model_dir=args.model_dir,
        cache_dir=args.cache_dir,
        sampling=args.sampling,
        max_sockets=args.max_sockets,
        ready_timeout_s=args.ready_timeout,
        results_stem=stem,
        external_url=args.external_url,
        external_api=args.external_api,
        external_model=args.external_model,
        external_api_key=args.external_api_key,
        external_vllm=args.external_vllm,
    )
    records: list[dict[str, Any]] = []
    for name in args.configs:
        try:
            records.append(await run_config(name, args=args, options=options, mix=mix))
        except Exception as exc:  # report what was measured; say which config failed
            print(f"error: {name} failed: {exc!r}", flush=True)
            records.append(
                {
                    "config": name,
                    "label": CONFIG_LABELS[name],
                    "error": f"{type(exc).__name__}: {exc}"[:500],
                    "points": [],
                    "load_average_before": harness.load_average(),
                }
            )
    points = summaries_of(records)
    plots: list[Path] = []
    if points:
        plots = plot(
            points=points,
            outcomes=outcomes_of(records),
            stem=stem,
            load_label="concurrency" if args.closed_loop else "offered rate (req/s)",
            cdf_load=args.cdf_load if args.cdf_load is not None else max(args.loads),
            ttft_target_s=args.ttft_target_s,
        )
    text = markdown(args=args, records=records, points=points, plots=plots, mix=mix, stamp=stamp)
    print("\n" + text, flush=True)
    report = harness.report_base(stamp=stamp, model_dir=args.model_dir, module=MODULE) | {
        "loads": args.loads,
        "closed_loop": args.closed_loop,
        "requests_per_point": args.requests,
        "warmup": args.warmup,
        "mix": dict(mix),
        "seed": args.seed,
        "max_tokens": args.max_tokens,
        "sampling": dataclasses.asdict(args.sampling),
        "ttft_target_s": args.ttft_target_s,
        "goals": [vars(g) for g in goals(points, ttft_target_s=args.ttft_target_s)],
        "sustained": dict(sustained_by_config(points, ttft_target_s=args.ttft_target_s)),
        "configs": records,
    }
    harness.write_results(name="load", stamp=stamp, markdown=text, report=report)
    return 0 if all(not r.get("error") for r in records) else 1
