"""Helpers for tests that run the app as real processes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import connect

from inference.models.paths import default_data_dir
from modelprep.faq_verifier import prepare_faq_verifier
from tests.support.intents import intents_seeded
from tests.support.net import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
MANAGE = [sys.executable, str(REPO_ROOT / "manage.py")]


def local_env(
    data_dir: Path, extra: Mapping[str, str], *, dropped: Iterable[str] = ()
) -> dict[str, str]:
    """An app process's environment on the local settings (SQLite, in-memory layer), its data
    in `data_dir`: this process's environment without REDIS_URL, DATABASE_URL and `dropped`,
    DEBUG off, output unbuffered, then `extra`."""
    left_out = {"REDIS_URL", "DATABASE_URL", *dropped}
    return {
        **{k: v for k, v in os.environ.items() if k not in left_out},
        "DJANGO_SETTINGS_MODULE": "chatapp.settings.local",
        "CHAT_DATA_DIR": str(data_dir),
        "DEBUG": "0",
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def manage_run(env: Mapping[str, str], *commands: Sequence[str]) -> None:
    """`manage.py <command>` for each command in turn, output captured; fails on an error."""
    for command in commands:
        subprocess.run(
            [*MANAGE, *command], env=dict(env), check=True, cwd=REPO_ROOT, capture_output=True
        )


_API_KEY_MADE = """
from django.contrib.auth.models import User
from chatapp.apikeys.services import api_key_create
user, _ = User.objects.get_or_create(username={username!r})
key = api_key_create(user=user, name={name!r}, rate_limit={rate}, max_concurrent={concurrent})
print(key.secret)
"""


def api_key_made(
    env: Mapping[str, str],
    *,
    name: str,
    username: str = "api-client",
    rate: int = 1000,
    max_concurrent: int = 8,
) -> str:
    """A new API key of `username` (made if needed) in the app's database; the secret."""
    script = _API_KEY_MADE.format(
        username=username, name=name, rate=rate, concurrent=max_concurrent
    )
    done = subprocess.run(
        [*MANAGE, "shell", "-c", script],
        env=dict(env),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def serve_until_exit(env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """`manage.py serve` that is expected to stop by itself (a start-up refusal)."""
    return subprocess.run(
        [*MANAGE, "serve", "--port", str(free_port())],
        env=dict(env),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def repo_process(args: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[str]:
    """`args` started in the repository root, stdout and stderr together on one text pipe (read
    it with `wait_for_line`, then `keep_draining`)."""
    return subprocess.Popen(
        list(args),
        env=dict(env),
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def prepared_verifier_env() -> dict[str, str]:
    """For a worker on a throwaway data dir with the FAQ cache on: the FAQ verifier `make
    test` prepared (prepared here if it was not; a no-op otherwise)."""
    folder = prepare_faq_verifier(data_dir=default_data_dir(), progress=lambda _: None)
    return {"INFERENCE_FAQ_VERIFIER_DIR": str(folder)}


def wait_for_line(
    proc: subprocess.Popen[str], pattern: str, timeout: float, seen: list[str] | None = None
) -> str:
    """Read the process's output until a line matches; fail with the output if it dies.
    `seen` collects every line read (the matching one included)."""
    seen = [] if seen is None else seen
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                break
            continue
        seen.append(line)
        if re.search(pattern, line):
            return line
    raise AssertionError(f"no line matching {pattern!r}; output:\n{''.join(seen[-40:])}")


def login(host: str, password: str, username: str = "demo") -> str:
    """The session cookie of `username` (the demo user by default), logged in on `host`."""
    with httpx.Client(base_url=f"http://{host}") as client:
        page = client.get("/accounts/login/")
        token = client.cookies["csrftoken"]
        assert page.status_code == 200
        answer = client.post(
            "/accounts/login/",
            data={
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": token,
            },
            headers={"Referer": f"http://{host}/accounts/login/"},
        )
        assert answer.status_code == 302, answer.text[:500]
        return client.cookies["sessionid"]


def chat_socket(host: str, session: str, **options: Any) -> connect:
    """The chat WebSocket of the web process at `host` (`127.0.0.1:PORT`), logged in with the
    `session` cookie, as the page opens it: await it, or use it with `async with`."""
    return connect(
        f"ws://{host}/ws/chat/",
        additional_headers={"Cookie": f"sessionid={session}", "Origin": f"http://{host}"},
        **options,
    )


def chat_send(text: str) -> str:
    """A `chat.send` frame of `text` in a new conversation, as the page sends it."""
    return json.dumps(
        {"type": "chat.send", "id": str(uuid.uuid4()), "conversation_id": None, "text": text}
    )


async def frames_until(ws: Any, kind: str, timeout: float = 60) -> list[dict[str, Any]]:
    frames = []
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), timeout))
        frames.append(frame)
        if frame["type"] in (kind, "chat.error"):
            return frames


def keep_draining(proc: subprocess.Popen[str]) -> list[str]:
    """Keep reading a process's output in the background so a full pipe never blocks it."""
    lines: list[str] = []

    def _drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    threading.Thread(target=_drain, daemon=True).start()
    return lines


@dataclass(frozen=True, slots=True)
class Served:
    """A running `manage.py serve`: where it listens and what it has printed so far."""

    proc: subprocess.Popen[str]
    port: int
    output: list[str]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextlib.contextmanager
def app_served(
    *, env: Mapping[str, str], ready_timeout: float = 90, kill: bool = False, port: int = 0
) -> Iterator[Served]:
    """`manage.py serve` on `port` (0: a free one) until the block ends: ready when it says so.

    `kill`: end it with SIGKILL (a graceful stop takes seconds; fine when the data dir is thrown
    away); otherwise terminate, then kill if it lingers.
    """
    port = port or free_port()
    intents_seeded(Path(env["CHAT_DATA_DIR"]))
    proc = repo_process([*MANAGE, "serve", "--port", str(port)], env)
    try:
        before: list[str] = []
        wait_for_line(proc, rf"Ready: open http://127\.0\.0\.1:{port}/", ready_timeout, before)
        output = keep_draining(proc)
        output[:0] = before  # what it said on the way to Ready, then what it says after
        yield Served(proc=proc, port=port, output=output)
    finally:
        if kill:
            proc.kill()
            proc.wait(timeout=30)
        else:
            process_stop(proc, timeout=20)


# ---- fault tests: a dedicated Redis, process lifetimes, polling --------------------------


def redis_server_start(port: int, timeout: float = 15) -> subprocess.Popen[str]:
    """A throw-away redis-server on `port` (no persistence): a restart loses everything."""
    import redis

    proc = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = keep_draining(proc)
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                if client.ping():
                    return proc
            except redis.RedisError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"redis-server on {port} did not start:\n{''.join(output)}")
            time.sleep(0.05)
    finally:
        client.close()


def process_stop(proc: subprocess.Popen[str], timeout: float = 15) -> None:
    """Terminate, then kill if it does not go; a process that already exited is left alone."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


def processes_stop(procs: Sequence[subprocess.Popen[str]], timeout: float = 15) -> None:
    """Terminate them all at once, then wait for each, killing one that does not go."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


def wait_until(what: str, check: Callable[[], Any], timeout: float, interval: float = 0.05) -> Any:
    """Poll `check()` until it returns something truthy; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout} s waiting for {what} (last: {value!r})"
            )
        time.sleep(interval)
