"""`python -m bench.load`: the load benchmark (see bench/load/__init__.py and bench/README.md)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from bench import harness
from bench.load.targets import CONFIG_NAMES
from bench.load.workload import parse_mix, parse_numbers

DEFAULT_RATES = "1,2,4,8"
# 1 s: the limit for a reply to feel like it keeps up with the user's flow of thought. On the
# 2-core dev CPU a near-idle Gemma 270M answer starts in ~0.2-0.4 s (0.6-0.9 s for a long
# prompt without a cached prefix), so the target leaves room for a short queue, no more.
DEFAULT_TTFT_TARGET_S = 1.0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.load",
        description="Load benchmark: our app (WebSocket) vs itself with the optimisations "
        "off vs vLLM's own OpenAI server, same model, same workload, same seed.",
    )
    parser.add_argument(
        "--configs",
        default="full,baseline,vllm",
        help=f"comma-separated, run in this order, one at a time: {', '.join(CONFIG_NAMES)}",
    )
    sweep = parser.add_mutually_exclusive_group()
    sweep.add_argument(
        "--rates", help=f"offered rates in req/s, Poisson arrivals (default {DEFAULT_RATES})"
    )
    sweep.add_argument("--concurrency", help="closed loop instead: requests kept in flight")
    parser.add_argument("--requests", type=int, default=48, help="measured requests per point")
    parser.add_argument("--warmup", type=int, default=4, help="sequential warm-up requests")
    parser.add_argument(
        "--mix", default="faq=0.4,template=0.3,free=0.3", help="workload weights by kind"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--ttft-target-s",
        type=float,
        default=DEFAULT_TTFT_TARGET_S,
        help=f"P95 TTFT a sustained rate must stay within (default {DEFAULT_TTFT_TARGET_S:g})",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="default: the model's own (max_new_tokens in its generation_config.json)",
    )
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=harness.DEFAULT_MODEL_DIR,
        help=f"default {harness.DEFAULT_MODEL_DIR.relative_to(harness.REPO_ROOT)} (the app's)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=harness.REPO_ROOT / "data" / "cache",
        help="compile caches to reuse (VLLM_CACHE_ROOT = <cache-dir>/vllm)",
    )
    parser.add_argument(
        "--max-sockets", type=int, default=48, help="bench users / sockets (requests in flight)"
    )
    parser.add_argument("--pause", type=float, default=2.0, help="idle seconds between points")
    parser.add_argument("--cdf-load", type=float, default=None, help="default: the highest")
    parser.add_argument("--ready-timeout", type=float, default=600.0)
    parser.add_argument("--external-url", default="", help="config external: base URL")
    parser.add_argument("--external-api", choices=("chat", "completions"), default="chat")
    parser.add_argument("--external-model", default="")
    parser.add_argument("--external-api-key", default="")
    parser.add_argument(
        "--external-vllm",
        action="store_true",
        help="config external: send vLLM's sampling extensions (top_k, repetition_penalty, "
        "the model's stop strings); off for servers that refuse them, like our own API",
    )
    args = parser.parse_args(argv)
    try:
        args.configs = [c.strip() for c in args.configs.split(",") if c.strip()]
        unknown = [c for c in args.configs if c not in CONFIG_NAMES]
        if unknown or not args.configs:
            raise ValueError(f"unknown config(s) {unknown}; choose from {', '.join(CONFIG_NAMES)}")
        if "external" in args.configs and not args.external_url:
            raise ValueError("config external needs --external-url")
        args.closed_loop = args.concurrency is not None
        if args.closed_loop:
            args.loads = parse_numbers(args.concurrency, name="--concurrency")
            if any(c != int(c) for c in args.loads):
                raise ValueError("--concurrency must list whole numbers")
        else:
            args.loads = parse_numbers(args.rates or DEFAULT_RATES, name="--rates")
        args.loads = sorted(set(args.loads))  # ascending: the first point is the near-idle one
        parse_mix(args.mix)
        if args.requests < 2 or args.warmup < 0:
            raise ValueError("--requests must be at least 2 and --warmup not negative")
        if args.ttft_target_s <= 0:
            raise ValueError("--ttft-target-s must be positive")
        if args.max_tokens is not None and not 1 <= args.max_tokens <= 8192:
            raise ValueError("--max-tokens must be 1..8192")
        if max(args.loads) > args.max_sockets and args.closed_loop:
            raise ValueError("--concurrency above --max-sockets")
    except ValueError as exc:
        parser.error(str(exc))
    args.model_dir = args.model_dir.resolve()
    if not (args.model_dir / "config.json").is_file():
        parser.error(f"{args.model_dir} is not a prepared model folder (make prepare-model)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    from bench.load.run import run

    return asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
