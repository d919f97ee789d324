"""The product against vLLM's own OpenAI server, at each dtype, on the same prompts.

    .venv/bin/python -m bench.dtype_ttft [--dtypes bfloat16,float32] [--rounds 2] \\
        [--requests 10] [--targets app,vllm] [--variant NAME:KEY=VALUE;KEY=VALUE ...]

The probe of issue 29: one shared system prompt sized so that ~320 prompt tokens come from
the prefix cache (10 blocks of 32), then a short question of its own (~343 prompt tokens in
all), 16 new tokens, one request at a time with `--gap` s idle before each.

* `app`: the product as shipped (`manage.py serve`, the embedded default) driven over its own
  OpenAI-compatible API (`/v1/chat/completions` with an API key, the bench.load `api`
  target): the request goes through Django, the worker and its vLLM engine;
* `vllm`: vLLM's own server (`python -m vllm.entrypoints.openai.api_server`) on the same model
  folder with the same engine sizes (the bench.load `vllm` target).

Both get the same messages (system + user) from the same client, so the same prompt tokens.
Each configuration (target x dtype x variant) is started, warmed up (2 requests: the first
fills the prefix cache with the system prompt), measured and stopped before the next starts:
never two engines at once on a small machine. `--rounds` repeats the whole sequence, in
reverse order every other round, so a drift of the machine hits every configuration alike.
`VLLM_DTYPE` selects the dtype on both sides (the app's engine reads it; the bench.load vLLM
server passes what `inference.engines.dtype` chooses for it). A `--variant` adds environment
to both sides (or to one: `NAME@app`), e.g. `--variant tcmalloc:LD_PRELOAD=/usr/lib/
x86_64-linux-gnu/libtcmalloc_minimal.so.4` (an engine knob against the default), or
`--variant 'nofaq@app:CHAT_FAQ_ENABLED=0;INFERENCE_FAQ=0'` (what the FAQ lookup costs).

Per request: TTFT (to the first non-blank text), ITL (first to last piece over the tokens
between them: the app coalesces deltas, so its pieces hold several tokens), prompt and cached
tokens. The report: median and P90 over all rounds, and each TTFT median over vLLM's server at
its best dtype (the goal: the product's <= 1.1x). Written to bench/results/dtype_ttft-<stamp>.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bench import harness
from bench.load.results import Outcome
from bench.load.workload import WorkItem
from bench.long_conversation import common_prefix

TargetName = Literal["app", "vllm"]
TARGET_LABELS: dict[str, str] = {"app": "this product", "vllm": "vLLM's server"}
DTYPES = ("bfloat16", "float16", "float32")
# vLLM's CPU worker logs these when it runs below its best (bench/README: engine knobs)
LOG_WARNINGS: dict[str, str] = {
    "onednn_fallback": "fallback to torch linear",
    "no_tcmalloc": "libtcmalloc is not found in LD_PRELOAD",
    "no_iomp": "libiomp is not found in LD_PRELOAD",
}

# Questions no FAQ entry of the bench's seed covers, each in a new conversation.
QUESTIONS: tuple[str, ...] = (
    "Can I change the delivery address after ordering?",
    "Do you ship to Norway?",
    "Why was my card declined?",
    "Can I order by phone?",
    "Is the red scarf made of wool?",
    "How long is the warranty on headphones?",
    "Can I pick up my order in person?",
    "Do you offer student discounts?",
    "Can I pay in instalments?",
    "Why is my order still processing?",
    "Do you sell refurbished laptops?",
    "Can I return a gift without a receipt?",
)
WARMUP: tuple[str, ...] = ("Hello, are you there?", "What does your shop sell?")
# (system prompt, question) -> the prompt tokens the worker builds
TokensOf = Callable[[str, str], list[int]]


# ---- the probe ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeItem(WorkItem):
    """A question behind the probe's shared system prompt (sent as messages, not a template)."""

    system_prompt: str

    @property
    def system(self) -> str | None:
        return self.system_prompt


def size_system_prompt(
    *,
    words: Sequence[str],
    questions: Sequence[str],
    cached: int,
    tokens_of: TokensOf,
    total: int | None = None,
    block: int = 32,
) -> str:
    """The system prompt (the first words of `words`) whose prompts, with any two of
    `questions`, share at least `cached` leading tokens, what the prefix cache can hold (in
    whole blocks of `block`); then, up to `total` prompt tokens (the questions' median), longer
    while the shared part stays within the same blocks."""
    if len(questions) < 2:
        raise ValueError("sizing the shared prefix takes two questions")

    def shared(n: int) -> int:
        system = " ".join(words[:n])
        return common_prefix(tokens_of(system, questions[0]), tokens_of(system, questions[1]))

    def median_total(n: int) -> float:
        system = " ".join(words[:n])
        return harness.median([float(len(tokens_of(system, q))) for q in questions])

    lo, hi = 1, len(words)
    if shared(hi) < cached:
        raise ValueError(f"{len(words)} words share only {shared(hi)} tokens, not {cached}")
    while lo < hi:  # the shared prefix grows with the words
        mid = (lo + hi) // 2
        if shared(mid) >= cached:
            hi = mid
        else:
            lo = mid + 1
    n = lo
    limit = (cached // block + 1) * block  # the next block would be cached too
    while (
        total is not None
        and n < len(words)
        and shared(n + 1) < limit
        and median_total(n + 1) <= total
    ):
        n += 1
    return " ".join(words[:n])


def probe_words() -> list[str]:
    """A long support policy to cut the system prompt from (the bench's templates' prompts)."""
    from bench.template_bytes import TEMPLATES

    return " ".join(spec.system_prompt for spec in TEMPLATES).split()


# ---- configurations ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    target: TargetName
    dtype: str
    variant: str = "default"
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.target}-{self.dtype}-{self.variant}"

    @property
    def label(self) -> str:
        extra = "" if self.variant == "default" else f", {self.variant}"
        return f"{TARGET_LABELS[self.target]}, {self.dtype}{extra}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Variant:
    """Extra environment for some runs (`--variant`): all targets, or only `target`."""

    name: str
    env: Mapping[str, str]
    target: TargetName | None = None


def parse_variant(raw: str) -> Variant:
    """`NAME[@TARGET]:KEY=VALUE;KEY=VALUE`; `NAME:` alone: no extra env."""
    head, sep, rest = raw.partition(":")
    name, at, target = head.strip().partition("@")
    if not sep or not name or name == "default":
        raise ValueError(
            f"a variant is NAME[@app|@vllm]:KEY=VALUE[;KEY=VALUE] (NAME not 'default'): {raw!r}"
        )
    only: TargetName | None = None
    if at:
        if target not in TARGET_LABELS:
            raise ValueError(f"variant {name}: the target after @ is app or vllm, not {target!r}")
        only = "app" if target == "app" else "vllm"
    env: dict[str, str] = {}
    for part in rest.split(";"):
        if not part.strip():
            continue
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"variant {name}: {part!r} is not KEY=VALUE")
        env[key.strip()] = value
    return Variant(name=name, env=env, target=only)


def plan(
    *,
    targets: Sequence[TargetName],
    dtypes: Sequence[str],
    variants: Sequence[Variant],
    rounds: int,
) -> list[tuple[int, Config]]:
    """(round, config) in run order: every configuration once per round, every other round
    in reverse, so that a slow drift of the machine does not favour one of them."""
    configs = [
        Config(target=target, dtype=dtype, variant=v.name, env=dict(v.env))
        for v in [Variant(name="default", env={}), *variants]
        for dtype in dtypes
        for target in targets
        if v.target in (None, target)
    ]
    order: list[tuple[int, Config]] = []
    for r in range(rounds):
        order += [(r, config) for config in (configs if r % 2 == 0 else configs[::-1])]
    return order


# ---- statistics and the report -------------------------------------------------------------


def request_itl_s(outcome: Outcome) -> float | None:
    """Mean time per token after the first: first to last piece over the tokens between."""
    tokens = outcome.completion_tokens
    if outcome.ttft_s is None or not tokens or tokens < 2 or not outcome.itl_s:
        return None
    return sum(outcome.itl_s) / (tokens - 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    config: Config
    ttft_ms: list[float]
    itl_ms: list[float]
    prompt_tokens: list[float]
    cached_tokens: list[float]
    skipped: int  # not answered by the model (an error, or the FAQ cache)
    warnings: tuple[str, ...] = ()


def summarize(config: Config, outcomes: Sequence[Outcome], warnings: Sequence[str] = ()) -> Summary:
    model = [o for o in outcomes if o.status == "ok" and o.source == "model" and o.ttft_s]
    return Summary(
        config=config,
        ttft_ms=[o.ttft_s * 1000 for o in model if o.ttft_s is not None],
        itl_ms=[v * 1000 for o in model if (v := request_itl_s(o)) is not None],
        prompt_tokens=[float(o.prompt_tokens) for o in model if o.prompt_tokens is not None],
        cached_tokens=[
            float(o.cached_prompt_tokens) for o in model if o.cached_prompt_tokens is not None
        ],
        skipped=len(outcomes) - len(model),
        warnings=tuple(warnings),
    )


def _fmt(value: float, digits: int = 0) -> str:
    return "n/a" if value != value else f"{value:.{digits}f}"  # NaN: no values


def best_vllm(summaries: Sequence[Summary]) -> Summary | None:
    """vLLM's server at its fastest dtype (lowest TTFT median), default knobs."""
    own = [
        s
        for s in summaries
        if s.config.target == "vllm" and s.config.variant == "default" and s.ttft_ms
    ]
    return min(own, key=lambda s: harness.median(s.ttft_ms), default=None)


def markdown_table(summaries: Sequence[Summary]) -> str:
    best = best_vllm(summaries)
    base = harness.median(best.ttft_ms) if best else float("nan")
    lines = [
        "| | TTFT P50 | P90 | ITL P50 | P90 | prompt / cached tokens | n | TTFT / vLLM best |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        ttft = harness.median(s.ttft_ms)
        ratio = ttft / base if base == base and base > 0 else float("nan")
        mark = " (best)" if s is best else ""
        lines.append(
            f"| {s.config.label}{mark} | {_fmt(ttft)} ms | "
            f"{_fmt(harness.percentile(s.ttft_ms, q=0.9))} ms | "
            f"{_fmt(harness.median(s.itl_ms), 1)} ms | "
            f"{_fmt(harness.percentile(s.itl_ms, q=0.9), 1)} ms | "
            f"{_fmt(harness.median(s.prompt_tokens))} / {_fmt(harness.median(s.cached_tokens))} | "
            f"{len(s.ttft_ms)}{f' (+{s.skipped} skipped)' if s.skipped else ''} | "
            f"{_fmt(ratio, 2)}x |"
        )
    return "\n".join(lines)


def log_warnings(text: str) -> list[str]:
    """Which of vLLM's below-its-best warnings a server log holds."""
    return [name for name, needle in LOG_WARNINGS.items() if needle in text]


# ---- running -------------------------------------------------------------------------------


@contextlib.contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def items_of(system: str, questions: Sequence[str], *, start: int) -> list[ProbeItem]:
    return [
        ProbeItem(index=start + i, kind="free", text=q, system_prompt=system)
        for i, q in enumerate(questions)
    ]


async def measure(
    config: Config,
    *,
    args: argparse.Namespace,
    system: str,
    stem: Path,
) -> tuple[list[Outcome], list[str], float]:
    """Start the configuration, warm it up, send the questions one at a time, stop it."""
    from bench.load.clients import sequential
    from bench.load.targets import RunOptions, started
    from bench.prompts import BenchSampling

    options = RunOptions(
        model_dir=args.model_dir,
        cache_dir=args.cache_dir,
        sampling=BenchSampling.of_model_dir(args.model_dir, max_tokens=args.max_tokens),
        max_sockets=1,
        ready_timeout_s=args.ready_timeout,
        results_stem=stem,
    )
    env = {
        "VLLM_DTYPE": config.dtype,
        # the FAQ verifier is not trained in the background while this measures
        "INFERENCE_FAQ_VERIFIER_TRAIN": "0",
        **config.env,
    }
    outcomes: list[Outcome] = []
    with environment(env):
        async with started("api" if config.target == "app" else "vllm", options=options) as t:
            for item in items_of(system, WARMUP, start=-100):
                await asyncio.sleep(args.gap)
                await sequential(t.client, [item])
            for item in items_of(system, QUESTIONS[: args.requests], start=0):
                await asyncio.sleep(args.gap)
                outcomes += await sequential(t.client, [item])
            log = t.log_path.read_text(errors="replace") if t.log_path else ""
            return outcomes, log_warnings(log), t.startup_s


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--dtypes", default="bfloat16,float32", help="comma-separated")
    parser.add_argument("--targets", default="app,vllm", help="app, vllm or both")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=10, help="measured per config a round")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--cached-tokens", type=int, default=320)
    parser.add_argument("--prompt-tokens", type=int, default=343, help="the probe's median")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME[@app|@vllm]:KEY=VALUE[;KEY=VALUE]: also run every dtype (and every "
        "target, or the one after @) with this environment",
    )
    parser.add_argument("--ready-timeout", type=float, default=600.0)
    harness.add_engine_args(parser)
    parser.set_defaults(gap=1.0)
    args = parser.parse_args(argv)
    args.dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    if not args.dtypes or any(d not in DTYPES for d in args.dtypes):
        parser.error(f"--dtypes must list some of {', '.join(DTYPES)}")
    args.targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    if not args.targets or any(t not in TARGET_LABELS for t in args.targets):
        parser.error("--targets must list app and/or vllm")
    if not 1 <= args.requests <= len(QUESTIONS):
        parser.error(f"--requests must be 1..{len(QUESTIONS)}")
    try:
        args.variants = [parse_variant(raw) for raw in args.variant]
    except ValueError as exc:
        parser.error(str(exc))
    args.model_dir = args.model_dir.resolve()
    return args


def machine_facts() -> str:
    """The CPU, its bf16 flags and what the engine chooses here (`lscpu`'s gist)."""
    from inference.engines.dtype import CPU_BF16_FLAGS, choose_dtype, device_facts

    facts = device_facts()
    isa = [f for f in ("avx2", "avx512f", "avx512_vnni", *CPU_BF16_FLAGS) if f in facts.cpu_flags]
    return (
        f"- CPU: {harness.machine()}; flags: {' '.join(isa) or 'none of avx2/avx512/bf16'}\n"
        f"- the engine's own choice here: {choose_dtype('auto', facts).describe()}"
    )


async def run(args: argparse.Namespace) -> int:
    from bench.prompts import tokenizer_prompt_builder

    builder = tokenizer_prompt_builder(args.model_dir, context_tokens=4096)

    def tokens_of(system: str, question: str) -> list[int]:
        item = ProbeItem(index=0, kind="free", text=question, system_prompt=system)
        return item.prompt(builder, max_tokens=args.max_tokens).token_ids

    system = size_system_prompt(
        words=probe_words(),
        questions=QUESTIONS[: max(2, args.requests)],
        cached=args.cached_tokens,
        tokens_of=tokens_of,
        total=args.prompt_tokens,
    )
    sizes = [len(tokens_of(system, q)) for q in QUESTIONS[: args.requests]]
    print(f"==> probe: prompts of {min(sizes)}-{max(sizes)} tokens, shared system prompt")
    stamp = harness.timestamp()
    order = plan(
        targets=args.targets, dtypes=args.dtypes, variants=args.variants, rounds=args.rounds
    )
    results: dict[str, list[Outcome]] = {}
    warnings: dict[str, set[str]] = {}
    runs: list[dict[str, Any]] = []
    for r, config in order:
        print(f"==> round {r + 1}/{args.rounds}: {config.label}", flush=True)
        stem = harness.RESULTS_DIR / f"dtype_ttft-{stamp}-r{r + 1}-{config.key}"
        started = time.monotonic()
        outcomes, found, startup_s = await measure(config, args=args, system=system, stem=stem)
        results.setdefault(config.key, []).extend(outcomes)
        warnings.setdefault(config.key, set()).update(found)
        s = summarize(config, outcomes)
        print(
            f"    start {startup_s:.0f} s, TTFT P50 {_fmt(harness.median(s.ttft_ms))} ms, "
            f"ITL P50 {_fmt(harness.median(s.itl_ms), 1)} ms, skipped {s.skipped}, "
            f"warnings {found or 'none'} ({time.monotonic() - started:.0f} s)",
            flush=True,
        )
        runs.append(
            {
                "round": r + 1,
                "config": config.key,
                "startup_s": startup_s,
                "load_average": harness.load_average(),
                "outcomes": [dataclasses.asdict(o) for o in outcomes],
            }
        )
    configs = {config.key: config for _, config in order}
    summaries = [summarize(configs[key], results[key], sorted(warnings[key])) for key in configs]
    header = (
        f"dtype_ttft {stamp}: {args.rounds} rounds x {args.requests} requests per configuration, "
        f"one at a time, {args.gap:g} s apart, {args.max_tokens} new tokens; one engine at a "
        f"time\n\n{machine_facts()}\n- model: {args.model_dir}\n"
        f"- load average at the end: {harness.load_average()}\n"
        f"- command: `{harness.command_line(module='bench.dtype_ttft')}`"
    )
    notes = [
        f"- {s.config.label}: vLLM warned {', '.join(s.warnings)}" for s in summaries if s.warnings
    ]
    markdown = "\n\n".join([header, markdown_table(summaries), "\n".join(notes)]).rstrip()
    print("\n" + markdown, flush=True)
    report = harness.report_base(stamp=stamp, model_dir=args.model_dir, module="bench.dtype_ttft")
    report |= {
        "system_prompt": system,
        "prompt_sizes": sizes,
        "runs": runs,
        "summaries": [
            {
                "config": s.config.key,
                "env": dict(s.config.env),
                "ttft_ms": s.ttft_ms,
                "itl_ms": s.itl_ms,
                "skipped": s.skipped,
                "warnings": list(s.warnings),
            }
            for s in summaries
        ],
    }
    harness.write_results(name="dtype_ttft", stamp=stamp, markdown=markdown, report=report)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
