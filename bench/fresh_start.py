"""A newcomer's first run, timed: clone into a temporary folder, `make run` with an empty pip
cache, then the first answers over the socket.

    python -m bench.fresh_start                 # this checkout's HEAD
    python -m bench.fresh_start --ref a4c3bd6   # an earlier commit, for a before/after table
    python -m bench.fresh_start --timeout-s 600 # give up (and say where it was) after 10 min

Each step is the time between two of `make run`'s progress lines (`==> ...`, the model's
"Model loaded", "Ready:"), stamped as they are printed. After `Ready` it logs in as the demo
user and asks two of the page's first questions: an FAQ example (answered from the cache) and
one for the model, timing Send -> first token. Nothing is shared with this checkout: its own
venv, data dir and pip cache (`--warm-pip` reuses this user's pip cache instead), and no
CHAT_MODEL_CACHE, so nothing trained elsewhere is reused. The clone is deleted afterwards
unless `--keep`. Results: a markdown table on stdout and in bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import (
    REPO_ROOT,
    chat_send,
    demo_login,
    free_port,
    load_average,
    machine,
    timestamp,
    write_results,
)

# (label of the step that starts at this line, pattern); the first match of each counts
MARKERS: tuple[tuple[str, str], ...] = (
    ("install (venv, pip)", r"^==> Creating the virtualenv"),
    ("prepare the model", r"^==> Preparing the packaged"),
    ("train the FAQ verifier", r"^==> Training the FAQ"),
    ("migrate, demo user, examples", r"^==> Migrating"),
    ("start daphne, load the model", r"^==> Starting"),
    ("FAQ cache, warm-up", r"Model loaded in"),
)
READY = r"^Ready: "
FAQ_QUESTION = "Where is my order?"
MODEL_QUESTION = "Write a short, friendly reply to a customer whose parcel arrived late."


@dataclass(frozen=True, slots=True)
class Step:
    label: str
    started_s: float
    took_s: float


def steps_of(stamped: list[tuple[float, str]], *, end_s: float) -> list[Step]:
    """The steps between the first line matching each marker, in the order they appeared;
    the last one ends at `end_s` (Ready, or where the run stopped)."""
    found: list[tuple[float, str]] = []
    for label, pattern in MARKERS:
        match = next((at for at, line in stamped if re.search(pattern, line)), None)
        if match is not None:
            found.append((match, label))
    found.sort()
    return [
        Step(
            label=label,
            started_s=at,
            took_s=(found[i + 1][0] if i + 1 < len(found) else end_s) - at,
        )
        for i, (at, label) in enumerate(found)
    ]


class StampedOutput:
    """Reads a process's output on a thread, stamping each line (seconds since `t0`)."""

    def __init__(self, proc: subprocess.Popen[str], t0: float, log_path: Path) -> None:
        self.lines: list[tuple[float, str]] = []
        self._proc = proc
        self._t0 = t0
        self._log = log_path.open("w", encoding="utf-8")
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            at = time.monotonic() - self._t0
            self.lines.append((at, line.rstrip("\n")))
            self._log.write(f"{at:8.1f}  {line}")
            self._log.flush()

    def first(self, pattern: str) -> float | None:
        return next((at for at, line in self.lines if re.search(pattern, line)), None)


async def first_answers(base: str, password: str) -> dict[str, Any]:
    """Log in as demo, ask the FAQ example and the model question; Send -> first token."""
    import websockets

    session = await asyncio.to_thread(demo_login, base, password)
    host = base.removeprefix("http://")
    results: dict[str, Any] = {}
    async with websockets.connect(
        f"ws://{host}/ws/chat/",
        additional_headers={"Cookie": f"sessionid={session}", "Origin": base},
    ) as ws:
        for name, text in (("faq", FAQ_QUESTION), ("model", MODEL_QUESTION)):
            sent = time.monotonic()
            await ws.send(json.dumps(chat_send(text)))
            first: float | None = None
            answer = ""
            while True:
                reply = json.loads(await asyncio.wait_for(ws.recv(), 120))
                if reply["type"] == "chat.delta":
                    first = first if first is not None else time.monotonic() - sent
                    answer += reply["text"]
                if reply["type"] in ("chat.done", "chat.error"):
                    break
            results[name] = {
                "question": text,
                "first_token_ms": None if first is None else round(first * 1000, 1),
                "total_ms": round((time.monotonic() - sent) * 1000, 1),
                "from_faq": reply.get("source") == "faq",
                "ended": reply["type"],
                "answer_start": answer[:120],
            }
    return results


def stop_group(proc: subprocess.Popen[str], timeout_s: float = 30.0) -> None:
    """End `make run` and everything it started (its own process group): TERM, then KILL."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)  # anyone left in the group?
        except ProcessLookupError:
            break
        proc.poll()
        time.sleep(0.2)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="fresh-start-"))
    clone = work / "clone"
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "CHAT_DATA_DIR", "CHAT_MODEL_CACHE", "REDIS_URL")
        and not k.startswith(("DATABASE_URL", "INFERENCE_", "VLLM_"))
    }
    env.update(PYTHONUNBUFFERED="1", PORT=str(port), CHAT_DATA_DIR=str(clone / "data"))
    if not args.warm_pip:
        env["PIP_CACHE_DIR"] = str(work / "pip-cache")  # empty: everything is downloaded
    t0 = time.monotonic()
    subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", args.ref], check=True)
    clone_s = time.monotonic() - t0
    started = time.monotonic()
    proc = subprocess.Popen(
        ["make", "run", f"PORT={port}"],
        cwd=clone,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    log_path = work / "make-run.log"
    output = StampedOutput(proc, started, log_path)
    ready_s: float | None = None
    answers: dict[str, Any] = {}
    try:
        while time.monotonic() - started < args.timeout_s and proc.poll() is None:
            ready_s = output.first(READY)
            if ready_s is not None:
                break
            time.sleep(0.2)
        if ready_s is not None:
            password = (clone / "data" / "demo_password").read_text().strip()
            answers = asyncio.run(first_answers(f"http://127.0.0.1:{port}", password))
    finally:
        stop_group(proc)
        last = output.lines[-1][1] if output.lines else ""
        if args.keep:
            print(f"kept {work}")
        else:
            kept_log = REPO_ROOT / "bench" / "results" / f"fresh_start-{args.stamp}.log"
            kept_log.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(log_path, kept_log)
            shutil.rmtree(work, ignore_errors=True)
    end_s = ready_s if ready_s is not None else time.monotonic() - started
    steps = steps_of(output.lines, end_s=end_s)
    return {
        "ref": args.ref,
        "commit": subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", args.ref],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip(),
        "machine": machine(),
        "load_average": load_average(),
        "empty_pip_cache": not args.warm_pip,
        "clone_s": round(clone_s, 1),
        "steps": [
            {"step": s.label, "at_s": round(s.started_s, 1), "took_s": round(s.took_s, 1)}
            for s in steps
        ],
        "ready_s": None if ready_s is None else round(ready_s, 1),
        "stopped_at": None if ready_s is not None else last,
        "first_answers": answers,
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Fresh clone of {report['ref']} ({report['commit']}), `make run`, "
        f"{'empty' if report['empty_pip_cache'] else 'warm'} pip cache; {report['machine']}; "
        f"load average at the end {report['load_average']}",
        "",
        "| step | starts at (s) | took (s) |",
        "|---|---:|---:|",
        f"| git clone | - | {report['clone_s']} |",
    ]
    lines += [f"| {s['step']} | {s['at_s']} | {s['took_s']} |" for s in report["steps"]]
    if report["ready_s"] is not None:
        lines.append(f"| **`make run` to Ready** | | **{report['ready_s']}** |")
    else:
        lines.append(f"| not Ready; stopped at: `{report['stopped_at']}` | | |")
    for name, answer in report["first_answers"].items():
        source = "FAQ cache" if answer["from_faq"] else "model"
        lines.append(
            f"| first {name} question after Ready ({source}): Send -> first token (ms) | | "
            f"{answer['first_token_ms']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fresh_start", description=__doc__)
    parser.add_argument("--ref", default="HEAD", help="commit to clone (default HEAD)")
    parser.add_argument("--timeout-s", type=float, default=3600.0)
    parser.add_argument("--warm-pip", action="store_true", help="reuse the user's pip cache")
    parser.add_argument("--keep", action="store_true", help="keep the clone and its log")
    args = parser.parse_args(argv)
    args.stamp = timestamp()
    report = run(args)
    text = markdown(report)
    print(text)
    write_results(name="fresh_start", stamp=args.stamp, markdown=text, report=report)
    return 0 if report["ready_s"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
