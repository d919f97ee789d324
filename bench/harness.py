"""Shared pieces of the in-process benchmarks (`warmup_ttft`, `faq_ttft`, `template_bytes`).

* the app on a throwaway data dir: `fresh_app` (environment before Django is imported, then
  `django.setup()` and `migrate`), `add_engine_args` for the options that go with it;
* the engine and its worker inside the running loop: `loaded_engine` / `LoadedEngine`;
* a logged-in `/ws/chat/` socket through the full ASGI app: `chat_socket`, `send_and_wait`
  (`Reply`), `chat_send` (a frame); `demo_login` for an app served as a process;
* statistics and the report: `percentile`, `median`, `values_of`, `cpu_name`, `machine`,
  `load_average`, `command_line`, `timestamp`, `report_base`, `write_results`;
* servers the bench starts as subprocesses: `ServerProcess`, `free_port` (`bench.load`) and
  `EmbeddedApp`, the app of `make run` (`ws_vs_engine`, `first_token_hops`).

Django, channels and the engine are imported inside the functions: the environment has to be
configured before any of them is loaded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime as dt
import gc
import json
import os
import platform
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from inference.engines.base import Engine
    from inference.faq.cache import FaqCache
    from inference.settings import WorkerSettings
    from inference.worker import InferenceWorker

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "bench" / "results"
# The app's default model (SmolLM2 135M Instruct, `python -m modelprep prepare`);
# `--model-dir DIR` measures any other Hugging Face folder with a chat template instead.
DEFAULT_MODEL_DIR = REPO_ROOT / "data" / "models" / "smollm2-135m-instruct"
# The FAQ verifier `make run` prepared: benches run on throwaway data dirs, so they point
# workers here (INFERENCE_FAQ_VERIFIER_DIR, unless already set).
PREPARED_VERIFIER_DIR = REPO_ROOT / "data" / "models" / "faq-verifier"


# Customer-support questions the latency benchmarks ask (ws_vs_engine, priority_ttft).
SUPPORT_QUESTIONS: tuple[str, ...] = (
    "Do you ship to Canada?",
    "How much does standard shipping cost?",
    "Where is my order? It was supposed to arrive yesterday.",
    "Can I return a pair of shoes I already wore once?",
    "What payment methods do you accept?",
    "My package arrived damaged, what should I do?",
    "How do I cancel my order?",
    "Do you offer gift wrapping?",
    "Can I use two discount codes on the same order?",
    "I was charged twice for the same order, can you help?",
    "How do I change the email address on my account?",
    "Is it possible to exchange a shirt for a different size?",
    "Do you have a physical store I can visit?",
    "When will the blue jacket be back in stock?",
    "How can I track my parcel?",
    "Do you offer express delivery?",
    "Can I order without creating an account?",
    "My discount code says it is invalid, why?",
    "How do I unsubscribe from your newsletter?",
    "Do you price match other stores?",
    "Is my payment information stored securely?",
    "Can I add an item to an order I already placed?",
    "What is your return policy for sale items?",
    "Do you sell gift cards?",
)

# ---- the app on a throwaway data dir -----------------------------------------------------


def add_engine_args(parser: argparse.ArgumentParser) -> None:
    """`--gap`, `--model-dir` and `--cache-dir`, as every engine benchmark takes them."""
    parser.add_argument(
        "--gap",
        type=float,
        default=1.5,
        help="idle seconds before every request (default 1.5): vLLM's CPU worker busy-polls "
        "for 1 s after each step",
    )
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=DEFAULT_MODEL_DIR,
        help=f"default {DEFAULT_MODEL_DIR.relative_to(REPO_ROOT)} (the app's default model)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=REPO_ROOT / "data" / "cache",
        help="compile caches to reuse (VLLM_CACHE_ROOT = <cache-dir>/vllm)",
    )


def configure_environment(
    *, data_dir: Path, model_dir: Path, cache_dir: Path, extra: Mapping[str, str] | None = None
) -> None:
    """The embedded default on a throwaway data dir, reusing the real compile caches."""
    for key in ("REDIS_URL", "DATABASE_URL", "CHAT_MAX_TOKENS", "INFERENCE_ENGINE"):
        os.environ.pop(key, None)
    os.environ |= {
        "DJANGO_SETTINGS_MODULE": "chatapp.settings.local",
        "CHAT_DATA_DIR": str(data_dir),
        "MODEL": str(model_dir),
        "VLLM_CACHE_ROOT": str(cache_dir / "vllm"),
        "TORCHINDUCTOR_CACHE_DIR": str(cache_dir / "torchinductor"),
        "TRITON_CACHE_DIR": str(cache_dir / "triton"),
        "HF_HOME": str(cache_dir / "huggingface"),
        "INFERENCE_FAQ_VERIFIER_DIR": os.environ.get(
            "INFERENCE_FAQ_VERIFIER_DIR", str(PREPARED_VERIFIER_DIR)
        ),
        **(extra or {}),
    }


@contextlib.contextmanager
def fresh_app(
    *, prefix: str, model_dir: Path, cache_dir: Path, extra_env: Mapping[str, str] | None = None
) -> Iterator[Path]:
    """Configure the app on a temp data dir, set Django up, migrate; remove the dir after."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    configure_environment(
        data_dir=workdir, model_dir=model_dir, cache_dir=cache_dir, extra=extra_env
    )
    try:
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0, interactive=False)
        yield workdir
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_in_fresh_app(
    run: Callable[[argparse.Namespace], Coroutine[Any, Any, T]],
    args: argparse.Namespace,
    *,
    prefix: str,
    extra_env: Mapping[str, str] | None = None,
) -> T:
    """`run(args)` to its end in a `fresh_app` on `--model-dir` and `--cache-dir` (resolved)."""
    with fresh_app(
        prefix=prefix,
        model_dir=args.model_dir.resolve(),
        cache_dir=args.cache_dir.resolve(),
        extra_env=extra_env,
    ):
        return asyncio.run(run(args))


# ---- the engine and its worker -----------------------------------------------------------


@dataclass(kw_only=True)
class LoadedEngine:
    """The engine built inside the running loop, and the tasks to stop before shutting it down."""

    engine: Engine | None
    load_s: float
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def track(self, task: asyncio.Task[None]) -> asyncio.Task[None]:
        """Cancel `task` (before the engine shuts down) when the block ends."""
        self.tasks.append(task)
        return task

    async def start_worker(
        self, *, settings: WorkerSettings, faq: FaqCache | None = None
    ) -> InferenceWorker:
        """An `InferenceWorker` on the channel layer, once it is ready (60 s at most)."""
        from channels.layers import get_channel_layer

        from inference.runtime import start_worker

        assert self.engine is not None
        worker, task = start_worker(
            engine=self.engine, layer=get_channel_layer(), settings=settings, faq=faq
        )
        self.track(task)
        await asyncio.wait_for(worker.ready.wait(), 60)
        return worker


@contextlib.asynccontextmanager
async def loaded_engine(*, worker_settings: WorkerSettings) -> AsyncIterator[LoadedEngine]:
    """Build the engine (timed); on exit cancel the tracked tasks, newest first, then shut the
    engine down and drop it."""
    from inference.runtime import build_engine
    from inference.settings import EngineSettings

    engine_settings = EngineSettings.from_env()
    started = time.monotonic()
    engine = build_engine(worker_settings=worker_settings, engine_settings=engine_settings)
    loaded = LoadedEngine(engine=engine, load_s=time.monotonic() - started)
    try:
        yield loaded
    finally:
        for task in reversed(loaded.tasks):
            task.cancel()
        await asyncio.gather(*reversed(loaded.tasks), return_exceptions=True)
        engine.shutdown()
        # drop it now: AsyncLLM.__del__ at interpreter exit would shut down again, noisily
        loaded.engine = None
        del engine
        gc.collect()


# ---- the WebSocket -----------------------------------------------------------------------


def chat_send(text: str, *, conversation_id: str | None = None) -> dict[str, Any]:
    """A `chat.send` frame of `text` as the page sends it (`sendFrame`,
    frontend/src/protocol.ts): a new conversation unless `conversation_id` is given."""
    return {
        "type": "chat.send",
        "id": str(uuid.uuid4()),
        "conversation_id": conversation_id,
        "text": text,
    }


def demo_login(base_url: str, password: str, username: str = "demo") -> str:
    """Log in as `demo` (`manage.py demo_user`), or `username`, through the login form of the
    app served at `base_url`; returns the session cookie."""
    import httpx

    with httpx.Client(base_url=base_url) as client:
        client.get("/accounts/login/")
        answer = client.post(
            "/accounts/login/",
            data={
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": client.cookies["csrftoken"],
            },
            headers={"Referer": f"{base_url}/accounts/login/"},
        )
        if answer.status_code != 302:
            raise RuntimeError(f"login failed: {answer.status_code} {answer.text[:300]}")
        return str(client.cookies["sessionid"])


def session_cookie(*, user: Any) -> str:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return str(client.cookies["sessionid"].value)


@contextlib.asynccontextmanager
async def chat_socket(*, username: str = "bench") -> AsyncIterator[Any]:
    """A new user, logged in, on `/ws/chat/` through `chatapp.asgi.application`."""
    from asgiref.sync import sync_to_async
    from channels.testing import WebsocketCommunicator
    from django.contrib.auth.models import User

    from chatapp.asgi import application

    user = await sync_to_async(User.objects.create_user)(
        username, password=secrets.token_urlsafe(16)
    )
    cookie = await sync_to_async(session_cookie)(user=user)
    ws = WebsocketCommunicator(
        application,
        "/ws/chat/",
        # the page's own origin, as a browser on http://localhost sends it
        headers=[
            (b"host", b"localhost"),
            (b"origin", b"http://localhost"),
            (b"cookie", f"sessionid={cookie}".encode()),
        ],
    )
    try:
        connected, _ = await ws.connect()
        if not connected:
            raise RuntimeError("the WebSocket was refused")
        yield ws
    finally:
        with contextlib.suppress(Exception):
            await ws.disconnect()


@dataclass(kw_only=True)
class Measures:
    """What one `chat.send` measured: client-side times (s) and what `chat.done` reports.

    A result record that holds them lists what identifies it in a dataclass of its own and
    derives from both, `class Trial(harness.Measures, TrialKey)`: dataclass fields follow the
    bases from the last, so the record (and its JSON) has its key first, then these."""

    ttft_s: float | None  # None: no chat.delta (the model stopped at once)
    accepted_s: float
    total_s: float
    prompt_tokens: int | None
    cached_prompt_tokens: int | None
    completion_tokens: int | None
    server_ttft_ms: float | None
    queue_wait_ms: float | None
    server_total_ms: float | None
    answer: str


@dataclass(kw_only=True)
class Reply(Measures):
    """One `chat.send` answered: its measures, the whole `chat.done` and the conversation."""

    done: dict[str, Any]
    conversation_id: str | None  # from `chat.accepted`

    def fields(self) -> dict[str, Any]:
        """The measures as keyword arguments for a result record (`done` and the
        conversation left out)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(Measures)}


async def send_and_wait(*, ws: Any, frame: dict[str, Any], timeout_s: float = 120) -> Reply:
    """Send `frame` and time the answer up to `chat.done` from the moment it is sent, each
    frame within `timeout_s`. Times are seconds; `accepted_s` is -1.0 if `chat.accepted`
    never came."""
    started = time.perf_counter()
    await ws.send_json_to(frame)
    accepted_s = first_delta_s = -1.0
    conversation_id: str | None = None
    parts: list[str] = []
    while True:
        received: dict[str, Any] = await ws.receive_json_from(timeout=timeout_s)
        now = time.perf_counter() - started
        kind = received.get("type")
        if kind == "chat.accepted":
            accepted_s = now
            conversation_id = str(received["conversation_id"])
        elif kind == "chat.delta":
            if first_delta_s < 0:
                first_delta_s = now
            parts.append(str(received["text"]))
        elif kind == "chat.done":
            done = received
            break
        elif kind in {"chat.error", "chat.resend_full"}:
            raise RuntimeError(f"unexpected frame: {received}")
        # templates.changed and anything else: ignore
    total_s = time.perf_counter() - started
    usage = done.get("usage") or {}
    timings = done.get("timings") or {}
    return Reply(
        ttft_s=first_delta_s if first_delta_s >= 0 else None,
        accepted_s=accepted_s,
        total_s=total_s,
        prompt_tokens=usage.get("prompt_tokens"),
        cached_prompt_tokens=usage.get("cached_prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        server_ttft_ms=timings.get("ttft_ms"),
        queue_wait_ms=timings.get("queue_wait_ms"),
        server_total_ms=timings.get("total_ms"),
        answer="".join(parts),
        done=done,
        conversation_id=conversation_id,
    )


# ---- statistics --------------------------------------------------------------------------


def percentile(values: Sequence[float], *, q: float) -> float:
    """The q-quantile (0 <= q <= 1) by linear interpolation between closest ranks (numpy's
    default), NaN for no values: chatapp.latency.percentiles' `linear` rule."""
    # Imported here: importing chatapp loads Django and Celery, which a bench process that
    # measures its own memory must not carry before it does (see the module docstring).
    from chatapp.latency.percentiles import percentile as percentile_of

    value = percentile_of(values, Fraction(q) * 100, method="linear")
    return float("nan") if value is None else value


def median(values: Sequence[float]) -> float:
    """The median, NaN for no values."""
    return statistics.median(values) if values else float("nan")


def values_of(items: Iterable[object], *, attr: str, scale: float = 1.0) -> list[float]:
    """`item.<attr> * scale` of every item where it is a number (None is left out)."""
    out = []
    for item in items:
        value = getattr(item, attr)
        if isinstance(value, int | float):
            out.append(float(value) * scale)
    return out


# ---- the report --------------------------------------------------------------------------


def cpu_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def machine() -> str:
    """`<CPU> (<n> logical cores), Python <version>` for a report header."""
    return f"{cpu_name()} ({os.cpu_count()} logical cores), Python {platform.python_version()}"


def load_average() -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages (other work on the machine skews a benchmark)."""
    one, five, fifteen = os.getloadavg()
    return (round(one, 2), round(five, 2), round(fifteen, 2))


def command_line(*, module: str) -> str:
    """How this run was started: `<python> -m <module> <args>`, python relative to the repo."""
    python = Path(sys.executable)
    with contextlib.suppress(ValueError):
        python = python.relative_to(REPO_ROOT)
    return " ".join([str(python), "-m", module, *sys.argv[1:]])


def timestamp() -> str:
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def report_base(*, stamp: str, model_dir: Path, module: str) -> dict[str, Any]:
    """The first keys of an engine benchmark's JSON report."""
    return {
        "timestamp": stamp,
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "model_dir": str(model_dir),
        "command": command_line(module=module),
    }


def write_results(
    *, name: str, stamp: str, markdown: str, report: Mapping[str, Any], ensure_ascii: bool = True
) -> None:
    """`bench/results/<name>-<stamp>.{md,json}`, then say so on stdout."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stem = RESULTS_DIR / f"{name}-{stamp}"
    stem.with_suffix(".md").write_text(markdown + "\n", encoding="utf-8")
    stem.with_suffix(".json").write_text(
        json.dumps(report, indent=2, ensure_ascii=ensure_ascii), encoding="utf-8"
    )
    print(f"\nwrote {stem.with_suffix('.md')} and {stem.with_suffix('.json')}")


# ---- servers started by a benchmark --------------------------------------------------------


# Debian's Chromium (.ci/install-browser); Playwright never downloads its own here.
CHROMIUM = Path(os.environ.get("E2E_CHROMIUM", "/usr/bin/chromium"))


def chromium_launch(playwright: Any) -> Any:
    """Headless Debian Chromium through Playwright's `executable_path`."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)


def chromium_missing() -> bool:
    """True (and says what to do) when there is no Chromium for a browser benchmark."""
    if CHROMIUM.exists():
        return False
    print(f"no Chromium at {CHROMIUM}: run .ci/install-browser", file=sys.stderr)
    return True


def embedded_env(*, model_dir: Path, database: Path, password: str) -> dict[str, str]:
    """`make run`'s environment for a benchmark's app: this machine's models, a throwaway
    SQLite database, the demo password; Redis, Postgres and the engine choice left out."""
    return {
        key: value
        for key, value in os.environ.items()
        if key not in {"REDIS_URL", "DATABASE_URL", "INFERENCE_ENGINE"}
    } | {
        "CHAT_DATA_DIR": str(REPO_ROOT / "data"),
        "MODEL": str(model_dir),
        "DEMO_PASSWORD": password,
        "DATABASE_URL": f"sqlite:///{database}",
        "PYTHONUNBUFFERED": "1",
    }


def staff_login(page: Any, *, base_url: str, password: str) -> None:
    """The demo user logs in through the login form (Playwright page); the chat page is ready."""
    from playwright.sync_api import expect

    page.goto(f"{base_url}/accounts/login/")
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("textbox", name="Message")).to_be_editable()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ServerProcess:
    """A server in its own process group, its output in a log file; `stop` ends the group."""

    def __init__(self, *, args: Sequence[str], env: Mapping[str, str], log_path: Path) -> None:
        self.args = list(args)
        self.env = dict(env)
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("w", encoding="utf-8")
        self.proc = subprocess.Popen(
            self.args,
            cwd=REPO_ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def check_alive(self) -> None:
        """Raise with the end of the log if the server has exited."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(
                f"{self.args[:4]} exited with {self.proc.returncode}:\n{self.log_text()[-4000:]}"
            )

    def stop(self, *, timeout_s: float = 30.0) -> list[int]:
        """SIGTERM the group, SIGKILL what is left after `timeout_s`; the killed pids."""
        import psutil

        if self.proc is None:
            return []
        try:
            root = psutil.Process(self.proc.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            tree = []
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        _, alive = psutil.wait_procs(tree, timeout=timeout_s)
        killed = []
        for proc in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
                killed.append(int(proc.pid))
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        if self._log is not None:
            self._log.close()
            self._log = None
        return killed


class EmbeddedApp(ServerProcess):
    """`manage.py serve` in embedded mode, in its own process group."""

    def __init__(self, *, env: dict[str, str], port: int, log_path: Path) -> None:
        super().__init__(
            args=[sys.executable, "manage.py", "serve", "--port", str(port)],
            env=env,
            log_path=log_path,
        )
        self.port = port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def prepare(self) -> None:
        python = sys.executable
        for args in (["migrate", "--noinput"], ["demo_user"]):
            subprocess.run(
                [python, "manage.py", *args],
                cwd=REPO_ROOT,
                env=self.env,
                check=True,
                capture_output=True,
            )

    async def wait_ready(self, timeout_s: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        while "Ready:" not in self.log_text():
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"server not ready in {timeout_s:.0f} s")
            await asyncio.sleep(0.2)
