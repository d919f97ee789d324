"""The website widget's perceived latency, side by side with the staff chat page, in Chromium.

Run from the repository root, with the default model prepared (`make run` once) and Debian's
Chromium installed:

    .venv/bin/python -m bench.widget [--rounds 8] [--max-tokens 16]

What happens:

1. The app starts as `make run` starts it (`manage.py serve`: daphne, the in-process worker and
   its vLLM engine; the FAQ cache off, so every question reaches the model) on a throwaway
   SQLite database, with a website allowing a host page this bench serves on another port.
2. Each round, in an order that alternates, one question on each page:
   - **widget**: a new visitor (a new browser context) opens the host page; the loader draws
     the launcher; the bench hovers it (the panel and its socket load), waits until the panel
     is connected, clicks, and measures click -> the message box focused (both on the
     browser's clock: `performance.timeOrigin + event.timeStamp` in the page, the same in the
     panel's frame). It then types the question and presses Enter.
   - **widget, no hover**: another visitor clicks straight away (the panel loads on the
     click: what a touch screen gets); it only opens the panel.
   - **staff page**: the logged-in demo user opens a new chat and asks.
   The first-token time is what each page shows under the answer (`data-ttft-ms`: frame sent
   -> first token painted; `data-first-delta-ms`: -> first delta received; the worker's own
   `data-server-ttft-ms`), the same code on both pages.
3. It prints the loader's and the panel's sizes (gzip -9) beside the chat page's, the
   medians and P90s, and writes them with the samples to `bench/results/widget-<stamp>.*`.

Fairness: one app, one engine, one browser; the pages take turns question by question (never
two answers at once), and the rounds alternate which page goes first. Both pages ask the
round's question with first words of their own ("(w3)", "(s3)"): asked verbatim, the second
asker's prompt came from the prefix cache (a first run here showed ~145 ms first, ~99 ms
second, whichever page it was). The visitor's page and panel stay open during both of its
round's questions: with the staff question asked after the visitor's context was closed, the
worker's own TTFT was 10 ms lower for the staff page (three renderer processes against one,
on the engine's 2 cores), which is the bench's machine, not the product.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gzip
import http.server
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import harness

MODULE = "bench.widget"
SITE_KEY = "site_bench"
# Before Enter on either page: nobody types a question in no time, and the browser (a new
# context, the panel's own renderer process) is still busy for a moment after it opens, on
# the same 2 cores as the engine.
TYPING_S = 1.5
# The launcher's click on the host page's clock (absolute, so the panel's frame compares).
HOST_RECORDER = """
window.__clicks = [];
document.addEventListener("click", (e) => {
  window.__clicks.push(performance.timeOrigin + e.timeStamp);
}, true);
"""
# The message box's focus in the panel's frame, on the same absolute clock.
PANEL_RECORDER = """
window.__focused = [];
document.addEventListener("focusin", (e) => {
  if (e.target && e.target.id === "chat-input") {
    window.__focused.push(performance.timeOrigin + e.timeStamp);
  }
}, true);
"""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--model-dir", type=Path, default=harness.DEFAULT_MODEL_DIR)
    parser.add_argument("--ready-timeout", type=float, default=600)
    return parser.parse_args(argv)


def gzipped_kb(path: Path) -> float:
    return len(gzip.compress(path.read_bytes(), compresslevel=9)) / 1000


class _HostPage(http.server.BaseHTTPRequestHandler):
    def __init__(self, *args: Any, chat_url: str, **kwargs: Any) -> None:
        self.chat_url = chat_url
        super().__init__(*args, **kwargs)

    def do_GET(self) -> None:
        body = (
            "<!doctype html><html><head><title>Shop</title></head><body><h1>Our shop</h1>"
            f'<script src="{self.chat_url}/widget.js" data-site="{SITE_KEY}" async></script>'
            "</body></html>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def host_page(port: int, chat_url: str) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", port), functools.partial(_HostPage, chat_url=chat_url)
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()


def site_create(app: harness.EmbeddedApp, host_origin: str) -> None:
    code = (
        "from chatapp.websites.models import Site\n"
        f"s = Site(name='bench', key='{SITE_KEY}', allowed_origins='{host_origin}',"
        " visitor_rate=1000, new_visitors_per_address=100000)\n"
        "s.full_clean(); s.save()\n"
    )
    import subprocess

    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=harness.REPO_ROOT,
        env=app.env,
        check=True,
        capture_output=True,
    )


@dataclass(frozen=True)
class FirstToken:
    page_ms: float  # `data-ttft-ms`: frame sent -> first token painted, on the page's clock
    worker_ms: float  # `data-server-ttft-ms`: the worker's own TTFT
    first_delta_ms: float  # `data-first-delta-ms`: frame sent -> the first delta received


def first_token(frame: Any, answers_before: int, question: str) -> FirstToken:
    from playwright.sync_api import expect

    box = frame.get_by_role("textbox", name="Message")
    time.sleep(TYPING_S)
    box.fill(question)
    box.press("Enter")
    answers = frame.locator('[data-role="assistant"]')
    expect(answers).to_have_count(answers_before + 1, timeout=60_000)
    answer = answers.nth(answers_before)
    expect(answer).to_have_attribute("data-status", "complete", timeout=120_000)
    # the stats line under the answer (src/answerstream.ts `showStats`)
    stats = frame.locator("[data-ttft-ms]")
    expect(stats).to_have_count(answers_before + 1, timeout=30_000)
    line = stats.nth(answers_before)
    return FirstToken(
        page_ms=float(line.get_attribute("data-ttft-ms") or "nan"),
        worker_ms=float(line.get_attribute("data-server-ttft-ms") or "nan"),
        first_delta_ms=float(line.get_attribute("data-first-delta-ms") or "nan"),
    )


@contextmanager
def visitor(browser: Any, host: str, *, hover: bool) -> Iterator[tuple[Any, float]]:
    """A new visitor opens the host page and the widget: (the panel's frame, click -> input
    focused ms). The visitor's browser context stays open until the block ends."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1200, "height": 800})
    try:
        page = context.new_page()
        page.add_init_script(HOST_RECORDER)
        context.add_init_script(PANEL_RECORDER)
        page.goto(host + "/")
        launcher = page.get_by_role("button", name="Chat with us")
        expect(launcher).to_be_visible(timeout=30_000)
        panel = page.frame_locator('iframe[title="Chat with us"]')
        if hover:
            launcher.hover()
            expect(panel.locator("#connection-status")).to_have_attribute(
                "data-state", "connected", timeout=30_000
            )
            time.sleep(0.3)  # the pointer travels from the edge of the button to the click
        launcher.click()
        expect(panel.get_by_role("textbox", name="Message")).to_be_focused(timeout=30_000)
        clicked = page.evaluate("window.__clicks[0]")
        frame = next(f for f in page.frames if "/widget/panel/" in f.url)
        focused = frame.evaluate("window.__focused[0]")
        expect(panel.locator("#connection-status")).to_have_attribute(
            "data-state", "connected", timeout=30_000
        )
        yield panel, float(focused) - float(clicked)
    finally:
        context.close()


def staff_round(page: Any, base_url: str, question: str) -> FirstToken:
    from playwright.sync_api import expect

    page.goto(f"{base_url}/")
    expect(page.locator("#connection-status")).to_have_attribute(
        "data-state", "connected", timeout=30_000
    )
    return first_token(page, 0, question)


def cell(values: Sequence[float]) -> str:
    if not values:
        return "n/a | n/a"
    return f"{harness.percentile(values, q=0.5):.1f} | {harness.percentile(values, q=0.9):.1f}"


def run(args: argparse.Namespace) -> int:
    from playwright.sync_api import sync_playwright

    if harness.chromium_missing():
        return 2
    model_dir = args.model_dir.resolve()
    stamp = harness.timestamp()
    workdir = Path(tempfile.mkdtemp(prefix="bench-widget-"))
    password = secrets.token_urlsafe(9)
    host_port = harness.free_port()
    env = harness.embedded_env(
        model_dir=model_dir, database=workdir / "bench.sqlite3", password=password
    ) | {
        "CHAT_MAX_TOKENS": str(args.max_tokens),
        "CHAT_USER_RATE": "100000",
        "INFERENCE_FAQ": "0",
        "CHAT_FAQ_ENABLED": "0",
    }
    app = harness.EmbeddedApp(
        env=env,
        port=harness.free_port(),
        log_path=harness.RESULTS_DIR / f"widget-{stamp}.server.log",
    )
    print(f"==> starting the app on {app.base_url} (log: {app.log_path})", flush=True)
    app.prepare()
    site_create(app, f"http://127.0.0.1:{host_port}")
    app.start()
    ready: list[float] = []
    cold_ready: list[float] = []
    widget_ttft: list[FirstToken] = []
    staff_ttft: list[FirstToken] = []
    try:
        asyncio.run(app.wait_ready(args.ready_timeout))
        with host_page(host_port, app.base_url) as host, sync_playwright() as playwright:
            browser = harness.chromium_launch(playwright)
            staff = browser.new_context(viewport={"width": 1200, "height": 800}).new_page()
            harness.staff_login(staff, base_url=app.base_url, password=password)
            # one answer each before measuring: the first after start-up is not what users get
            with visitor(browser, host, hover=True) as (panel, _):
                first_token(panel, 0, "Hello, are you there?")
            staff_round(staff, app.base_url, "Hello, are you there?")
            questions = harness.SUPPORT_QUESTIONS
            for n in range(args.rounds):
                # The same question on both pages, each with its own first words, so neither
                # reuses the other's prompt from the engine's prefix cache.
                question = questions[n % len(questions)]
                order = ("widget", "staff") if n % 2 == 0 else ("staff", "widget")
                # The visitor's page and panel stay open during both questions, so both run
                # beside the same browser processes.
                with visitor(browser, host, hover=True) as (panel, ms):
                    ready.append(ms)
                    for which in order:
                        if which == "staff":
                            asked = f"(s{n}) {question}"
                            staff_ttft.append(staff_round(staff, app.base_url, asked))
                        else:
                            widget_ttft.append(first_token(panel, 0, f"(w{n}) {question}"))
                with visitor(browser, host, hover=False) as (_, cold_ms):
                    cold_ready.append(cold_ms)
                print(
                    f"[{n + 1}] click->ready {ready[-1]:6.1f} ms (no hover {cold_ms:7.1f} ms)"
                    f"  first token: widget {widget_ttft[-1].page_ms:6.1f} ms (worker "
                    f"{widget_ttft[-1].worker_ms:6.1f}), staff {staff_ttft[-1].page_ms:6.1f} ms "
                    f"(worker {staff_ttft[-1].worker_ms:6.1f})",
                    flush=True,
                )
            browser.close()
    finally:
        killed = app.stop()
        if killed:
            print(f"warning: had to SIGKILL leftover server processes {killed}", flush=True)
    static = harness.REPO_ROOT / "static"
    sizes = {name: gzipped_kb(static / name) for name in ("widget.js", "panel.js", "chat.js")}
    markdown = "\n".join(
        [
            f"widget {stamp}: {args.rounds} rounds in Chromium, answers capped at "
            f"{args.max_tokens} tokens, FAQ cache off",
            "",
            f"- machine: {harness.machine()}",
            f"- model: {model_dir}",
            f"- command: `{harness.command_line(module=MODULE)}`",
            "",
            "| size (gzip -9) | kB |",
            "|---|---:|",
            f"| loader `widget.js` (goal <= 5) | {sizes['widget.js']:.1f} |",
            f"| panel `panel.js` (goal <= 50) | {sizes['panel.js']:.1f} |",
            f"| staff chat page `chat.js` | {sizes['chat.js']:.1f} |",
            "",
            "| measure (ms) | P50 | P90 |",
            "|---|---:|---:|",
            f"| widget: click -> input ready, after hover (goal P50 <= 150) | {cell(ready)} |",
            f"| widget: click -> input ready, no hover | {cell(cold_ready)} |",
            f"| widget: first token painted | {cell([w.page_ms for w in widget_ttft])} |",
            f"| staff page: first token painted | {cell([s.page_ms for s in staff_ttft])} |",
            f"| widget: first delta received | {cell([w.first_delta_ms for w in widget_ttft])} |",
            f"| staff page: first delta | {cell([s.first_delta_ms for s in staff_ttft])} |",
            f"| widget: the worker's own TTFT | {cell([w.worker_ms for w in widget_ttft])} |",
            f"| staff page: the worker's own TTFT | {cell([s.worker_ms for s in staff_ttft])} |",
        ]
    )
    print("\n" + markdown, flush=True)
    report = harness.report_base(stamp=stamp, model_dir=model_dir, module=MODULE) | {
        "sizes_kb_gzip": sizes,
        "click_to_ready_ms": ready,
        "click_to_ready_no_hover_ms": cold_ready,
        "widget_ttft_ms": [asdict(f) for f in widget_ttft],
        "staff_ttft_ms": [asdict(f) for f in staff_ttft],
    }
    harness.write_results(name="widget", stamp=stamp, markdown=markdown, report=report)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run(parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
