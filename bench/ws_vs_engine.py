"""TTFT and decode tokens/s: the WebSocket path of the app vs the vLLM engine called directly.

Run from the repository root (the default model must be prepared: `make prepare-model`):

    .venv/bin/python -m bench.ws_vs_engine [--requests 20] [--port 8766] [--model-dir DIR]

What happens:

1. The app starts in its embedded mode as a subprocess (`manage.py migrate`, `manage.py
   demo_user`, then `manage.py serve`: daphne + the in-process inference worker + its vLLM
   engine), on a throwaway SQLite database so that the bench never writes to the developer's
   one. The bench waits for "Ready:" in its output.
2. The bench process loads a second `VllmEngine` on the same model, inside its own asyncio loop.
3. Both paths are warmed up, then for every question the bench sends one request straight to
   the engine and then the same question over the WebSocket (a new conversation each time, so
   both prompts are byte-identical). Interleaving puts both paths under the same conditions.
   Every request waits `--gap` seconds (1.5) first: vLLM's CPU worker busy-polls for 1 s after
   each step and both engines' workers are pinned to the same core, so back-to-back requests
   would be slowed by the other engine's spinning (seen: 6x on TTFT, on whichever path ran
   second).
4. Per request it records TTFT, total time, completion tokens and decode tokens/s; for the
   WebSocket path also the worker's own `timings` from `chat.done`.
5. It prints a markdown table (median, p90, WS/direct ratio of medians) and writes it with
   the raw per-request data to `bench/results/ws_vs_engine-<timestamp>.{md,json}`, then
   measures the memory of both process trees and shuts everything down.

TTFT is measured to the first non-blank text on both paths: the worker strips the space that
starts every answer (the prompt ends with "Agent:") and never sends a blank first delta.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import gc
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil
import websockets
from websockets.asyncio.client import ClientConnection

from bench import harness
from inference.engine_request import engine_request_of
from inference.engines.vllm import VllmEngine
from inference.settings import DEFAULT_MODEL_DIR_NAME, EngineSettings
from inference.wire.protocol import ChatTurn, GenerateRequest, SamplingOptions

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "bench" / "results"
MODULE = "bench.ws_vs_engine"

QUESTIONS = harness.SUPPORT_QUESTIONS
WARMUP_QUESTIONS: tuple[str, ...] = (
    "Hello, is anyone there?",
    "What are your opening hours?",
)


# ---- measurements ------------------------------------------------------------------------


@dataclass(kw_only=True)
class Sample:
    path: str  # "direct" or "ws"
    question: str
    ttft_s: float
    total_s: float
    completion_tokens: int
    text: str
    chunks: int  # engine deltas (direct) or chat.delta frames (ws)
    server: dict[str, Any] = field(default_factory=dict)  # ws only: chat.done usage/timings

    @property
    def decode_tok_s(self) -> float | None:
        decode_s = self.total_s - self.ttft_s
        if self.completion_tokens < 2 or decode_s <= 0:
            return None
        return (self.completion_tokens - 1) / decode_s

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["decode_tok_s"] = self.decode_tok_s
        return data


async def measure_direct(engine: VllmEngine, question: str) -> Sample:
    """The same EngineRequest the worker builds for a one-turn conversation."""
    request = engine_request_of(
        GenerateRequest(
            request_id=f"bench-{uuid.uuid4()}",
            reply_channel="unused",
            messages=[ChatTurn(role="user", content=question)],
            sampling=SamplingOptions(temperature=0.0),
            submitted_at=time.time(),
        ),
        builder=engine.prompt_builder,
        defaults=engine.defaults,
    )
    parts: list[str] = []
    tokens = chunks = 0
    ttft: float | None = None
    started = time.perf_counter()
    async for delta in engine.stream(request):
        chunks += 1
        tokens += delta.tokens
        text = delta.text if parts else delta.text.lstrip()
        if not text:
            continue
        if ttft is None:
            ttft = time.perf_counter() - started
        parts.append(text)
    total = time.perf_counter() - started
    return Sample(
        path="direct",
        question=question,
        ttft_s=total if ttft is None else ttft,
        total_s=total,
        completion_tokens=tokens,
        text="".join(parts),
        chunks=chunks,
    )


async def measure_ws(ws: ClientConnection, question: str) -> Sample:
    frame_out = harness.chat_send(question)
    parts: list[str] = []
    ttft: float | None = None
    started = time.perf_counter()
    await ws.send(json.dumps(frame_out))
    while True:
        frame = json.loads(await ws.recv())
        kind = frame.get("type")
        if kind == "chat.delta":
            if ttft is None:
                ttft = time.perf_counter() - started
            parts.append(frame["text"])
        elif kind == "chat.done":
            total = time.perf_counter() - started
            break
        elif kind == "chat.error":
            raise RuntimeError(f"chat.error for {question!r}: {frame}")
    usage = frame.get("usage") or {}
    return Sample(
        path="ws",
        question=question,
        ttft_s=total if ttft is None else ttft,
        total_s=total,
        completion_tokens=int(usage.get("completion_tokens") or 0),
        text="".join(parts),
        chunks=len(parts),
        server={
            "status": frame.get("status"),
            "finish_reason": frame.get("finish_reason"),
            "usage": usage,
            "timings": frame.get("timings") or {},
        },
    )


# ---- statistics and report ----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Row:
    metric: str
    direct: list[float]
    ws: list[float]
    unit: str
    scale: float = 1.0

    def cells(self) -> list[str]:
        d_med, w_med = statistics.median(self.direct), statistics.median(self.ws)
        ratio = w_med / d_med if d_med else float("nan")

        def fmt(value: float) -> str:
            return f"{value * self.scale:.1f}"

        return [
            f"{self.metric} ({self.unit})",
            fmt(d_med),
            fmt(harness.percentile(self.direct, q=0.9)),
            fmt(w_med),
            fmt(harness.percentile(self.ws, q=0.9)),
            f"{ratio:.3f}",
        ]


def build_table(pairs: Sequence[tuple[Sample, Sample]]) -> str:
    direct = [d for d, _ in pairs]
    ws = [w for _, w in pairs]

    def rates(samples: Sequence[Sample]) -> list[float]:
        return [r for s in samples if (r := s.decode_tok_s) is not None]

    def row(metric: str, of: Callable[[Sample], float], unit: str, scale: float = 1.0) -> Row:
        """`of` every sample, direct and over the WebSocket."""
        direct_values, ws_values = [of(s) for s in direct], [of(s) for s in ws]
        return Row(metric=metric, direct=direct_values, ws=ws_values, unit=unit, scale=scale)

    rows = [
        row("TTFT", lambda s: s.ttft_s, "ms", scale=1000.0),
        row("total", lambda s: s.total_s, "ms", scale=1000.0),
        Row(metric="decode", direct=rates(direct), ws=rates(ws), unit="tok/s"),
        row("completion tokens", lambda s: float(s.completion_tokens), "n"),
    ]
    header = "| metric | direct median | direct p90 | WS median | WS p90 | WS/direct (medians) |"
    lines = [header, "|---|---:|---:|---:|---:|---:|"]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return "\n".join(lines)


def _ms(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def build_extras(pairs: Sequence[tuple[Sample, Sample]]) -> str:
    """Paired differences and the worker's own view of each WS request."""
    ttft_diff = [(w.ttft_s - d.ttft_s) * 1000 for d, w in pairs]
    total_diff = [(w.total_s - d.total_s) * 1000 for d, w in pairs]
    server_ttft = [v for _, w in pairs if (v := _ms(w.server["timings"].get("ttft_ms")))]
    queue_wait = [
        v for _, w in pairs if (v := _ms(w.server["timings"].get("queue_wait_ms"))) is not None
    ]
    overhead = []  # client TTFT minus what the worker saw (queueing + its own TTFT)
    for _, w in pairs:
        s_ttft = _ms(w.server["timings"].get("ttft_ms"))
        q_wait = _ms(w.server["timings"].get("queue_wait_ms"))
        if s_ttft is not None and q_wait is not None:
            overhead.append(w.ttft_s * 1000 - s_ttft - q_wait)
    same_text = sum(1 for d, w in pairs if d.text == w.text)
    same_tokens = sum(1 for d, w in pairs if d.completion_tokens == w.completion_tokens)
    chunks_direct = statistics.median(d.chunks for d, _ in pairs)
    chunks_ws = statistics.median(w.chunks for _, w in pairs)

    def med(values: Sequence[float]) -> str:
        if not values:
            return "n/a"
        return f"{statistics.median(values):.1f} (p90 {harness.percentile(values, q=0.9):.1f})"

    return "\n".join(
        [
            f"- paired WS - direct, TTFT: median {med(ttft_diff)} ms",
            f"- paired WS - direct, total: median {med(total_diff)} ms",
            f"- worker-side `timings.ttft_ms` (WS path): median {med(server_ttft)} ms",
            f"- worker-side `timings.queue_wait_ms` (WS path): median {med(queue_wait)} ms",
            "- WS TTFT minus (worker ttft_ms + queue_wait_ms), i.e. consumer/channel layer/"
            f"socket/DB before the worker starts: median {med(overhead)} ms",
            f"- identical answer text on both paths: {same_text}/{len(pairs)}; "
            f"identical completion tokens: {same_tokens}/{len(pairs)}",
            f"- median chunks per answer: {chunks_direct:g} engine deltas (direct) vs "
            f"{chunks_ws:g} `chat.delta` frames (WS, coalesced)",
        ]
    )


# ---- memory -------------------------------------------------------------------------------


def tree_memory(root_pid: int, *, exclude: int | None = None) -> list[dict[str, Any]]:
    """RSS/USS/PSS (MiB) of a process and all its descendants (minus the `exclude` subtree)."""
    root = psutil.Process(root_pid)
    skip: set[int] = set()
    if exclude is not None:
        with contextlib.suppress(psutil.NoSuchProcess):
            excluded = psutil.Process(exclude)
            skip = {int(p.pid) for p in [excluded, *excluded.children(recursive=True)]}
    rows: list[dict[str, Any]] = []
    for proc in [root, *root.children(recursive=True)]:
        if int(proc.pid) in skip:
            continue
        try:
            with proc.oneshot():
                name = proc.name()
                cmd = " ".join(proc.cmdline())[:120]
                rss = proc.memory_info().rss
                try:
                    info = proc.memory_full_info()
                    uss, pss = info.uss / 2**20, getattr(info, "pss", 0) / 2**20
                except psutil.AccessDenied:
                    uss, pss = None, None
                rows.append(
                    {
                        "pid": int(proc.pid),
                        "name": str(name),
                        "cmdline": str(cmd),
                        "rss_mib": round(rss / 2**20, 1),
                        "uss_mib": None if uss is None else round(uss, 1),
                        "pss_mib": None if pss is None else round(pss, 1),
                    }
                )
        except psutil.NoSuchProcess:
            continue
    return rows


def memory_table(title: str, rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        f"**{title}**",
        "",
        "| pid | process | RSS MiB | USS MiB | PSS MiB |",
        "|---:|---|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['pid']} | {row['name']} | {row['rss_mib']} | {row['uss_mib']} | "
            f"{row['pss_mib']} |"
        )
    total_rss = sum(float(r["rss_mib"]) for r in rows)
    total_pss = sum(float(r["pss_mib"] or 0) for r in rows)
    lines.append(f"| | **total** | {total_rss:.1f} | | {total_pss:.1f} |")
    return "\n".join(lines)


# ---- the app under test --------------------------------------------------------------------


# ---- main -----------------------------------------------------------------------------------


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    old = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=20, help="measured pairs (default 20)")
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("CHAT_DATA_DIR") or REPO_ROOT / "data"),
        help="CHAT_DATA_DIR with the prepared model (default <repo>/data)",
    )
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=None,
        help="default <data-dir>/models/smollm2-135m-instruct",
    )
    parser.add_argument("--warmup", type=int, default=2, help="warm-up requests per path")
    parser.add_argument(
        "--gap",
        type=float,
        default=1.5,
        help="idle seconds before every request (default 1.5): vLLM's CPU worker busy-polls "
        "for 1 s after each step, pinned to the same core in both engines, so without a gap "
        "the engine that ran last slows the other one down",
    )
    parser.add_argument("--ready-timeout", type=float, default=600.0)
    args = parser.parse_args(argv)
    if not 1 <= args.requests <= len(QUESTIONS):
        parser.error(f"--requests must be 1..{len(QUESTIONS)}")
    if not 0 <= args.warmup <= len(WARMUP_QUESTIONS):
        parser.error(f"--warmup must be 0..{len(WARMUP_QUESTIONS)}")
    return args


async def run(args: argparse.Namespace) -> int:
    data_dir: Path = args.data_dir.resolve()
    model_dir: Path = (args.model_dir or data_dir / "models" / DEFAULT_MODEL_DIR_NAME).resolve()
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stem = RESULTS_DIR / f"ws_vs_engine-{stamp}"

    password_file = data_dir / "demo_password"
    password = (
        password_file.read_text().strip() if password_file.exists() else ""
    ) or secrets.token_urlsafe(9)
    workdir = Path(tempfile.mkdtemp(prefix="ws_vs_engine-"))
    env = {
        key: value
        for key, value in os.environ.items()
        # the embedded default, the model's own max_tokens: same request as the direct path
        if key not in {"REDIS_URL", "DATABASE_URL", "CHAT_MAX_TOKENS", "INFERENCE_ENGINE"}
    }
    env |= {
        "CHAT_DATA_DIR": str(data_dir),
        "MODEL": str(model_dir),
        "DEMO_PASSWORD": password,
        # a throwaway database: the bench never touches the developer's conversations
        "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}",
        "PYTHONUNBUFFERED": "1",
    }
    app = harness.EmbeddedApp(env=env, port=args.port, log_path=stem.with_suffix(".server.log"))

    print(f"==> starting the app on {app.base_url} (log: {app.log_path})", flush=True)
    app.prepare()
    app.start()
    engine: VllmEngine | None = None
    report: dict[str, Any] = {}
    try:
        await app.wait_ready(args.ready_timeout)
        print("==> app ready; loading the bench's own engine", flush=True)
        started = time.monotonic()
        with _env(CHAT_DATA_DIR=str(data_dir), MODEL=str(model_dir)):
            settings = EngineSettings.for_model(model_dir)
        engine = VllmEngine.create(settings=settings)  # blocks; binds to this loop on use
        load_s = time.monotonic() - started
        print(f"==> engine loaded in {load_s:.1f} s", flush=True)

        session = await asyncio.to_thread(harness.demo_login, app.base_url, password)
        headers = {"Cookie": f"sessionid={session}", "Origin": app.base_url}
        uri = f"ws://127.0.0.1:{args.port}/ws/chat/"
        async with websockets.connect(uri, additional_headers=headers) as ws:
            for question in WARMUP_QUESTIONS[: args.warmup]:
                await asyncio.sleep(args.gap)
                await measure_direct(engine, question)
                await asyncio.sleep(args.gap)
                await measure_ws(ws, question)
            pairs: list[tuple[Sample, Sample]] = []
            for i, question in enumerate(QUESTIONS[: args.requests], start=1):
                await asyncio.sleep(args.gap)
                direct = await measure_direct(engine, question)
                await asyncio.sleep(args.gap)
                ws_sample = await measure_ws(ws, question)
                pairs.append((direct, ws_sample))
                print(
                    f"[{i:2d}/{args.requests}] TTFT direct {direct.ttft_s * 1000:7.1f} ms"
                    f"  ws {ws_sample.ttft_s * 1000:7.1f} ms | total direct "
                    f"{direct.total_s * 1000:7.1f}  ws {ws_sample.total_s * 1000:7.1f} ms"
                    f" | tokens {direct.completion_tokens}/{ws_sample.completion_tokens}",
                    flush=True,
                )

        assert app.proc is not None
        server_mem = tree_memory(app.proc.pid)
        bench_mem = tree_memory(os.getpid(), exclude=app.proc.pid)
        table = build_table(pairs)
        extras = build_extras(pairs)
        header = (
            f"ws_vs_engine {stamp}: {args.requests} interleaved pairs after {args.warmup} "
            f"warm-up requests per path, {args.gap:g} s idle before each request\n\n"
            f"- CPU: {harness.machine()}\n- model: {model_dir}\n"
            f"- command: `{harness.command_line(module=MODULE)}`"
        )
        markdown = "\n\n".join(
            [
                header,
                table,
                extras,
                memory_table("Server tree (daphne + embedded vLLM), after the run", server_mem),
                memory_table("Bench process tree (its own vLLM engine), after the run", bench_mem),
            ]
        )
        print("\n" + markdown, flush=True)
        report = {
            "timestamp": stamp,
            "cpu": harness.cpu_name(),
            "cpu_count": os.cpu_count(),
            "model_dir": str(model_dir),
            "requests": args.requests,
            "warmup": args.warmup,
            "gap_s": args.gap,
            "command": harness.command_line(module=MODULE),
            "bench_engine_load_s": load_s,
            "pairs": [{"direct": d.to_json(), "ws": w.to_json()} for d, w in pairs],
            "memory": {"server_tree": server_mem, "bench_tree": bench_mem},
        }
        stem.with_suffix(".md").write_text(markdown + "\n", encoding="utf-8")
    finally:
        if engine is not None:
            engine.shutdown()
            # drop it now: AsyncLLM.__del__ at interpreter exit would shut down again, noisily
            del engine
            gc.collect()
        killed = app.stop()
        if killed:
            print(f"warning: had to SIGKILL leftover server processes {killed}", flush=True)
        if report:
            report["server_sigkilled_pids"] = killed
            stem.with_suffix(".json").write_text(json.dumps(report, indent=2), encoding="utf-8")
            print(f"\nwrote {stem.with_suffix('.md')} and {stem.with_suffix('.json')}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
