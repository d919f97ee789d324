"""Where the time from Send to the first painted token goes: each hop's P50/P95, in Chromium.

Run from the repository root, with the default model prepared (`make run` once, or
`python -m modelprep prepare --model smollm2`) and Debian's Chromium installed:

    .venv/bin/python -m bench.first_token_hops [--rounds 4] [--per-round 5] [--gap 1.5]

What happens:

1. The app starts as `make run` starts it (`manage.py serve`: daphne, the in-process worker
   and its vLLM engine, the FAQ cache on) on a throwaway SQLite database, and the bench waits
   for "Ready:". Answers are capped at `--max-tokens` (16): only the first token is measured.
2. Chromium (Debian's, through Playwright's `executable_path`) logs in as the demo user. A
   script added before the page loads records, on the page's clock, each Enter keydown's
   `timeStamp` and the moment the page hands its `chat.send` to the WebSocket.
3. `--rounds` times: a new chat, then `--per-round` questions in a row (the first stands alone
   and is asked of the FAQ cache too; the others are follow-ups), each typed and sent with
   Enter after `--gap` seconds of idle, the answer awaited to its end. The very first question
   after start-up is reported on its own line and left out of the percentiles.
4. Per answer it reads what the page shows under it: the browser's time to first token
   (`data-ttft-ms`: the frame sent -> the first token painted), the first delta's arrival
   (`data-first-delta-ms`), the worker's own TTFT (`data-server-ttft-ms`) and the server's hops
   (`data-hops`, from `chat.done`: `docs/architecture.md`, "One message's first token").
5. It prints the hop table (P50/P95 per hop, ms) and writes it with the raw samples to
   `bench/results/first_token_hops-<timestamp>.{md,json}`.

With `--load N`, N more sockets of the same user ask questions back to back (each in a new
conversation, 0.2 s apart) the whole time, so the measured answers share the engine with
others' (the user may run 3 answers at once: `--load` is at most 2).

Clocks: the browser's hops are on the page's clock, the web process's on its own, the
worker's on the worker's; a hop is never the difference of two clocks. "Network and socket"
is the page's wait for the first delta minus the web process's span from reading the frame to
writing the first delta, i.e. both WebSocket legs (kernel, daphne, Chromium's parsing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import harness

MODULE = "bench.first_token_hops"
# Recorded on the page's clock (performance.now()/event.timeStamp share it).
PAGE_RECORDER = """
window.__hops = { presses: [], sends: [] };
document.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) window.__hops.presses.push(e.timeStamp);
}, true);
const send = WebSocket.prototype.send;
WebSocket.prototype.send = function (data) {
  try {
    const frame = JSON.parse(data);
    if (frame.type === "chat.send") window.__hops.sends.push(performance.now());
  } catch (_) {}
  return send.call(this, data);
};
"""
# Follow-ups that make sense after any of the support questions.
FOLLOW_UPS: tuple[str, ...] = (
    "Thanks. How long does that usually take?",
    "And is there a fee for that?",
    "Can you say that more briefly?",
    "What if I am outside the EU?",
    "Who do I contact if that does not work?",
    "Is that the same on weekends?",
)


@dataclass(frozen=True)
class Sample:
    question: str
    standalone: bool
    press_to_send_ms: float
    browser_ttft_ms: float  # sent -> painted, as the page shows it
    first_delta_ms: float  # sent -> the first delta arrived
    worker_ttft_ms: float
    hops: dict[str, float | None]

    @property
    def pressed_ttft_ms(self) -> float:
        """Enter pressed -> first token painted: what the user waited."""
        return self.press_to_send_ms + self.browser_ttft_ms

    def hop(self, name: str) -> float | None:
        h = self.hops

        def between(a: str, b: str) -> float | None:
            x, y = h.get(a), h.get(b)
            return None if x is None or y is None else y - x

        socket_span = h.get("socket_first_delta_ms")
        worker_sent = h.get("worker_first_delta_sent_ms")
        queue_wait = between("queued_ms", "relay_first_delta_ms")
        values: dict[str, float | None] = {
            "press -> frame sent (page)": self.press_to_send_ms,
            "network and socket, both ways": None
            if socket_span is None
            else self.first_delta_ms - socket_span,
            "received -> admitted": h.get("admitted_ms"),
            "admitted -> queued (history read, request built)": between("admitted_ms", "queued_ms"),
            "queue pickup + delta back to the relay": None
            if queue_wait is None or worker_sent is None
            else queue_wait - worker_sent,
            "worker: prompt rendered": h.get("worker_prompt_ms"),
            "engine: prompt -> first token": between(
                "worker_prompt_ms", "worker_engine_first_token_ms"
            ),
            "worker: first token -> delta sent": between(
                "worker_engine_first_token_ms", "worker_first_delta_sent_ms"
            ),
            "relay -> socket sent": between("relay_first_delta_ms", "socket_first_delta_ms"),
            "delta received -> painted (page)": self.browser_ttft_ms - self.first_delta_ms,
        }
        return values[name]


HOPS: tuple[str, ...] = (
    "press -> frame sent (page)",
    "network and socket, both ways",
    "received -> admitted",
    "admitted -> queued (history read, request built)",
    "queue pickup + delta back to the relay",
    "worker: prompt rendered",
    "engine: prompt -> first token",
    "worker: first token -> delta sent",
    "relay -> socket sent",
    "delta received -> painted (page)",
)
TOTALS: tuple[tuple[str, Callable[[Sample], float | None]], ...] = (
    # off the path since the turn is written while the worker starts (`runs.send_run_start`)
    ("(question stored, from received: alongside the engine)", lambda s: s.hops.get("stored_ms")),
    ("browser TTFT, Enter -> painted", lambda s: s.pressed_ttft_ms),
    ("worker TTFT (shown as 'server')", lambda s: s.worker_ttft_ms),
    ("browser TTFT - worker TTFT", lambda s: s.pressed_ttft_ms - s.worker_ttft_ms),
    (
        "browser TTFT - engine's own (prompt -> first token)",
        lambda s: (
            None
            if s.hop("engine: prompt -> first token") is None
            else s.pressed_ttft_ms - (s.hop("engine: prompt -> first token") or 0.0)
        ),
    ),
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4, help="new chats (default 4)")
    parser.add_argument("--per-round", type=int, default=5, help="questions per chat (5)")
    parser.add_argument("--gap", type=float, default=1.5, help="idle seconds before each send")
    parser.add_argument("--max-tokens", type=int, default=16, help="answer cap (16)")
    parser.add_argument("--port", type=int, default=0, help="app port (default: a free one)")
    parser.add_argument("--model-dir", type=Path, default=harness.DEFAULT_MODEL_DIR)
    parser.add_argument("--ready-timeout", type=float, default=600.0)
    parser.add_argument(
        "--load", type=int, default=0, choices=(0, 1, 2), help="other sockets asking meanwhile"
    )
    return parser.parse_args(argv)


def sample_of(page: Any, *, question: str, standalone: bool, index: int) -> Sample:
    meta = page.locator(".message-meta[data-ttft-ms]").nth(index)
    data = meta.evaluate("(el) => ({ ...el.dataset })")
    recorded = page.evaluate("window.__hops")
    return Sample(
        question=question,
        standalone=standalone,
        press_to_send_ms=float(recorded["sends"][index]) - float(recorded["presses"][index]),
        browser_ttft_ms=float(data["ttftMs"]),
        first_delta_ms=float(data["firstDeltaMs"]),
        worker_ttft_ms=float(data["serverTtftMs"]),
        hops=json.loads(data["hops"]),
    )


def ask(page: Any, *, question: str, answers_before: int) -> None:
    from playwright.sync_api import expect

    box = page.get_by_role("textbox", name="Message")
    box.fill(question)
    box.press("Enter")
    answers = page.locator('.message[data-role="assistant"]')
    expect(answers).to_have_count(answers_before + 1, timeout=60_000)
    expect(answers.nth(answers_before)).to_have_attribute(
        "data-status", "complete", timeout=120_000
    )
    expect(page.locator(".message-meta[data-ttft-ms]")).to_have_count(
        answers_before + 1, timeout=10_000
    )


def background_load(*, base_url: str, session: str, sockets: int, stop: threading.Event) -> int:
    """`sockets` sockets asking questions back to back until `stop`; the answers they got."""
    import websockets

    answered = 0

    async def client(index: int) -> None:
        nonlocal answered
        uri = base_url.replace("http://", "ws://") + "/ws/chat/"
        headers = {"Cookie": f"sessionid={session}", "Origin": base_url}
        async with websockets.connect(uri, additional_headers=headers) as ws:
            n = 0
            while not stop.is_set():
                question = harness.SUPPORT_QUESTIONS[
                    (index * 7 + n) % len(harness.SUPPORT_QUESTIONS)
                ]
                frame = harness.chat_send(f"{question} (load {index}.{n})")
                await ws.send(json.dumps(frame))
                while json.loads(await ws.recv())["type"] not in ("chat.done", "chat.error"):
                    pass
                answered += 1
                n += 1
                await asyncio.sleep(0.2)

    async def all_clients() -> None:
        await asyncio.gather(*(client(i) for i in range(sockets)))

    asyncio.run(all_clients())
    return answered


def table(samples: Sequence[Sample]) -> str:
    def cell(values: list[float]) -> str:
        if not values:
            return "n/a | n/a"
        p50 = harness.percentile(values, q=0.5)
        p95 = harness.percentile(values, q=0.95)
        return f"{p50:.1f} | {p95:.1f}"

    rows = ["| hop | P50 ms | P95 ms |", "|---|---:|---:|"]
    for name in HOPS:
        values = [v for s in samples if (v := s.hop(name)) is not None]
        rows.append(f"| {name} | {cell(values)} |")
    for name, of in TOTALS:
        values = [v for s in samples if (v := of(s)) is not None]
        rows.append(f"| **{name}** | {cell(values)} |")
    return "\n".join(rows)


def run(args: argparse.Namespace) -> int:
    from playwright.sync_api import expect, sync_playwright

    if harness.chromium_missing():
        return 2
    model_dir = args.model_dir.resolve()
    stamp = harness.timestamp()
    workdir = Path(tempfile.mkdtemp(prefix="first_token_hops-"))
    password = secrets.token_urlsafe(9)
    env = harness.embedded_env(
        model_dir=model_dir, database=workdir / "bench.sqlite3", password=password
    ) | {"CHAT_MAX_TOKENS": str(args.max_tokens)}
    if args.load:  # the load's sockets are the same user's: its rate limit is not measured
        env["CHAT_USER_RATE"] = "100000"
    port = args.port or harness.free_port()
    app = harness.EmbeddedApp(
        env=env, port=port, log_path=harness.RESULTS_DIR / f"first_token_hops-{stamp}.server.log"
    )
    print(f"==> starting the app on {app.base_url} (log: {app.log_path})", flush=True)
    app.prepare()
    started = time.monotonic()
    app.start()
    samples: list[Sample] = []
    first: Sample | None = None
    try:
        asyncio.run(app.wait_ready(args.ready_timeout))
        print(f"==> ready in {time.monotonic() - started:.1f} s", flush=True)
        with sync_playwright() as playwright:
            browser = harness.chromium_launch(playwright)
            page = browser.new_context(viewport={"width": 1200, "height": 800}).new_page()
            page.add_init_script(PAGE_RECORDER)
            harness.staff_login(page, base_url=app.base_url, password=password)
            stop = threading.Event()
            loaders: list[threading.Thread] = []
            if args.load:
                session = next(
                    c["value"] for c in page.context.cookies() if c["name"] == "sessionid"
                )
                loader = threading.Thread(
                    target=background_load,
                    kwargs={
                        "base_url": app.base_url,
                        "session": session,
                        "sockets": args.load,
                        "stop": stop,
                    },
                    daemon=True,
                )
                loader.start()
                loaders.append(loader)
            questions = harness.SUPPORT_QUESTIONS
            for round_no in range(args.rounds):
                if round_no:  # a new chat: the page loads again, its clock starts again
                    page.goto(f"{app.base_url}/")
                    expect(page.get_by_role("textbox", name="Message")).to_be_editable()
                expect(page.locator("#connection-status")).to_have_attribute(
                    "data-state", "connected", timeout=30_000
                )
                for i in range(args.per_round):
                    question = (
                        questions[round_no % len(questions)]
                        if i == 0
                        else FOLLOW_UPS[(round_no + i) % len(FOLLOW_UPS)]
                    )
                    time.sleep(args.gap)
                    ask(page, question=question, answers_before=i)
                    sample = sample_of(page, question=question, standalone=i == 0, index=i)
                    print(
                        f"[{round_no + 1}.{i + 1}] browser {sample.pressed_ttft_ms:7.1f} ms"
                        f"  worker {sample.worker_ttft_ms:7.1f} ms"
                        f"  difference {sample.pressed_ttft_ms - sample.worker_ttft_ms:6.1f} ms",
                        flush=True,
                    )
                    if first is None:
                        first = sample
                    else:
                        samples.append(sample)
            stop.set()
            for loader in loaders:
                loader.join(timeout=120)
            browser.close()
        assert first is not None
        header = (
            f"first_token_hops {stamp}: {len(samples)} answers in Chromium "
            f"({args.rounds} chats x {args.per_round} questions, the first after start-up "
            f"apart), {args.gap:g} s idle before each Enter, answers capped at "
            f"{args.max_tokens} tokens; {args.load} other socket(s) asking meanwhile\n\n"
            f"- machine: {harness.machine()}\n"
            f"- model: {model_dir}\n- command: `{harness.command_line(module=MODULE)}`"
        )
        first_line = (
            f"First question after start-up: browser {first.pressed_ttft_ms:.1f} ms, worker "
            f"{first.worker_ttft_ms:.1f} ms (difference "
            f"{first.pressed_ttft_ms - first.worker_ttft_ms:.1f} ms)."
        )
        markdown = "\n\n".join(
            [
                header,
                first_line,
                "All answers:\n\n" + table(samples),
                "Standalone questions (FAQ lookup alongside):\n\n"
                + table([s for s in samples if s.standalone]),
                "Follow-ups:\n\n" + table([s for s in samples if not s.standalone]),
            ]
        )
        print("\n" + markdown, flush=True)
        report = harness.report_base(stamp=stamp, model_dir=model_dir, module=MODULE) | {
            "first": asdict(first),
            "samples": [asdict(s) for s in samples],
        }
        harness.write_results(
            name="first_token_hops", stamp=stamp, markdown=markdown, report=report
        )
    finally:
        killed = app.stop()
        if killed:
            print(f"warning: had to SIGKILL leftover server processes {killed}", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
