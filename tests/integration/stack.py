"""A process stack for integration tests: web (daphne) processes, a scripted worker, Redis and
a PostgreSQL database, the multi-process topology of the README (`manage.py serve --no-worker`
and `python -m inference`), with the scripted engine (no model: it answers "You said:
<question>" word by word, 20 ms a word, 50 ms with `[[slow]]` in the question).

* `workdir` and `databases` (module-scoped fixtures, registered in tests/integration/conftest.py):
  the module's directory for process output and data, and a migrated template database (demo
  user included) that every stack gets its own copy of; all are removed at the end.
* `running_stack(name, workdir, databases, webs=...)`: a context manager that starts a `Stack`
  on its own redis-server (a free port; the shared one on 6379 is never touched) and database,
  and stops it on exit. `Stack` starts, kills and restarts its worker and Redis.
* the browser side: `session_for(host)` logs the demo user in, `Chat` is one logged-in tab's
  WebSocket, `Answer` what it showed of one answer; `send_frame`, `resume_frame` (the in-process
  tests' own, tests/support/sockets.py), and `slow_question` build what it sends.
* the stored side: `stored`, `stored_when_ended`, `messages_in`, `db_connection`, `db_value`
  read the stack's database; `workers_become` polls its worker registry.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from websockets.asyncio.client import ClientConnection

from inference.wire.registry import RedisWorkerRegistry
from tests.integration.processes import (
    MANAGE,
    REPO_ROOT,
    chat_socket,
    keep_draining,
    login,
    process_stop,
    redis_server_start,
    repo_process,
    wait_for_line,
    wait_until,
)
from tests.support.intents import intents_seeded
from tests.support.net import free_port
from tests.support.sockets import resume_frame as resume_frame  # the frames the page sends
from tests.support.sockets import send_frame as send_frame

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
PASSWORD = "faults-demo-pw-123"

STALL_TIMEOUT_S = 3.0
WORKER_HEARTBEAT_S = 0.5
# How long the registry keeps a worker that stopped announcing (InferenceWorker._announce).
WORKER_TTL_S = max(3.0, 3 * WORKER_HEARTBEAT_S)
BUSY_RETRY_AFTER_S = 1
MAX_ACTIVE = 16

ENV = {
    "DJANGO_SETTINGS_MODULE": "chatapp.settings.local",
    "DEMO_PASSWORD": PASSWORD,
    "DEBUG": "0",
    "PYTHONUNBUFFERED": "1",
    "INFERENCE_ENGINE": "scripted",
    "INFERENCE_FAQ": "0",
    "CHAT_FAQ_ENABLED": "0",
    "INFERENCE_MAX_ACTIVE": str(MAX_ACTIVE),
    "INFERENCE_HEARTBEAT_S": str(WORKER_HEARTBEAT_S),
    "CHAT_STALL_TIMEOUT_S": str(STALL_TIMEOUT_S),
    "CHAT_ACCEPT_TIMEOUT_S": "10",
    "CHAT_DISCONNECT_GRACE_S": "10",
    "CHAT_RELAY_HEARTBEAT_S": "0.5",
    # the load test sends 1,000 messages as the one demo user
    "CHAT_USER_MAX_CONCURRENT": "1000",
    "CHAT_USER_RATE": "100000",
    "CHAT_BUSY_RETRY_AFTER_S": str(BUSY_RETRY_AFTER_S),
    # long enough for the slow answers below (the scripted engine stops at max_tokens words)
    "CHAT_MAX_TOKENS": "400",
}


def slow_question(words: int) -> tuple[str, str]:
    """A question whose scripted answer streams one word per 50 ms; (question, answer)."""
    question = "[[slow]] " + " ".join(f"w{i}" for i in range(words))
    return question, f"You said: {question}"


# ---- processes ------------------------------------------------------------------------------


@dataclass
class Stack:
    """One Redis, one database, web processes and a worker, all started by one test module."""

    name: str
    env: dict[str, str]
    redis_port: int
    database: str
    logs_dir: Path
    redis: subprocess.Popen[str] | None = None
    webs: list[tuple[str, subprocess.Popen[str]]] = field(default_factory=list)
    worker: subprocess.Popen[str] | None = None
    # workers beside `worker` (`add_worker`), each with its metrics port
    more_workers: list[subprocess.Popen[str]] = field(default_factory=list)
    metrics_ports: dict[int, int] = field(default_factory=dict)  # worker pid -> port
    dead: list[subprocess.Popen[str]] = field(default_factory=list)
    output: dict[str, list[str]] = field(default_factory=dict)
    # a vLLM worker loads its model for a while; two at once on 2 cores take much longer
    worker_ready_s: float = 90
    workers_one_by_one: bool = False

    @property
    def redis_url(self) -> str:
        return self.env["REDIS_URL"]

    @property
    def hosts(self) -> list[str]:
        return [host for host, _ in self.webs]

    def _spawn(
        self, args: list[str], env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[str]:
        return repo_process(args, {**self.env, **(env or {})})

    def _drain(self, label: str, proc: subprocess.Popen[str]) -> None:
        key, n = label, 1
        while key in self.output:
            n += 1
            key = f"{label}-{n}"
        self.output[key] = keep_draining(proc)

    def start_redis(self) -> None:
        self.redis = redis_server_start(self.redis_port)

    def kill_redis(self) -> None:
        assert self.redis is not None
        self.redis.kill()
        self.redis.wait(timeout=10)

    def start(self, *, webs: int, workers: int = 1) -> None:
        """Start `webs` web processes and `workers` workers at once, then wait for them."""
        starting = []
        intents_seeded(Path(self.env["CHAT_DATA_DIR"]))
        for _ in range(webs):
            port = free_port()
            serve = ["serve", "--no-worker", "--host", "127.0.0.1", "--port", str(port)]
            starting.append((f"127.0.0.1:{port}", self._spawn([*MANAGE, *serve])))
        self.webs.extend(starting)
        if self.workers_one_by_one:
            self.start_worker(wait=True)
            for _ in range(workers - 1):
                self.add_worker(wait=True)
            more: list[subprocess.Popen[str]] = []
        else:
            more = [self.start_worker(wait=False)]
            more += [self.add_worker(wait=False) for _ in range(workers - 1)]
        for host, proc in starting:
            wait_for_line(proc, r"Serving on", 90)
            self._drain(f"web-{host}", proc)
        for proc in more:
            self._wait_worker(proc)

    def start_worker(self, *, wait: bool = True) -> subprocess.Popen[str]:
        assert self.worker is None or self.worker.poll() is not None, "one worker at a time"
        if self.worker is not None:
            self.dead.append(self.worker)
        self.worker = self._spawn_worker()
        if wait:
            self._wait_worker(self.worker)
        return self.worker

    def add_worker(self, *, wait: bool = True) -> subprocess.Popen[str]:
        """One more worker beside `worker`, on the same queue."""
        proc = self._spawn_worker()
        self.more_workers.append(proc)
        if wait:
            self._wait_worker(proc)
        return proc

    def _spawn_worker(self) -> subprocess.Popen[str]:
        port = free_port()
        proc = self._spawn(
            [sys.executable, "-m", "inference"], env={"INFERENCE_METRICS_PORT": str(port)}
        )
        self.metrics_ports[proc.pid] = port
        return proc

    def worker_metric(self, proc: subprocess.Popen[str], name: str) -> float:
        """One sample of a worker's own /metrics (0 if it has none yet)."""
        port = self.metrics_ports[proc.pid]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
        for line in text.splitlines():
            if line.startswith(f"{name} "):
                return float(line.split()[1])
        return 0.0

    def _wait_worker(self, proc: subprocess.Popen[str]) -> None:
        wait_for_line(proc, r"Inference worker ready", self.worker_ready_s)
        self._drain("worker", proc)

    def kill_worker(self) -> None:
        """SIGKILL: no error, no done, no withdrawal from the registry; it just vanishes."""
        assert self.worker is not None
        self.worker.kill()
        self.worker.wait(timeout=10)

    def stop(self) -> None:
        workers = (self.worker, *self.more_workers, *self.dead)
        procs = [p for _, p in self.webs] + [p for p in workers if p]
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:  # nothing of theirs needs a graceful end: the logs are read
            process_stop(proc, timeout=5)
        if self.redis is not None:
            self.redis.kill()
            self.redis.wait(timeout=10)
        for label, lines in self.output.items():
            name = f"{self.name}-{label}.log".replace(":", "-")
            (self.logs_dir / name).write_text("".join(lines))


@dataclass
class Databases:
    admin: psycopg.Connection[Any]
    template: str
    created: list[str] = field(default_factory=list)

    def fresh(self) -> str:
        """A new database: a copy of the migrated template, demo user included."""
        name = f"chat_faults_{uuid.uuid4().hex[:8]}"
        self.admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        self.created.append(name)
        return name


def base_env(data_dir: Path) -> dict[str, str]:
    env = {**os.environ, **ENV, "CHAT_DATA_DIR": str(data_dir)}
    for inherited in ("SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL"):
        env.pop(inherited, None)
    return env


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("faults")
    print(f"\n[faults] process output and data under {path}")
    return path


@pytest.fixture(scope="module")
def databases(workdir: Path) -> Iterator[Databases]:
    """Migrate once into a template database; each stack gets its own copy of it."""
    if subprocess.run(["redis-server", "--version"], capture_output=True).returncode != 0:
        pytest.fail("these tests run their own redis-server: it must be on PATH")
    try:
        admin = psycopg.connect(PG_ADMIN, autocommit=True)
    except psycopg.OperationalError as exc:
        pytest.fail(f"these tests need PostgreSQL on 127.0.0.1:5432 (.ci/run starts it): {exc}")
    template = f"chat_faults_tpl_{uuid.uuid4().hex[:8]}"
    admin.execute(f'CREATE DATABASE "{template}"')
    dbs = Databases(admin=admin, template=template)
    try:
        env = {
            **base_env(workdir / "data"),
            "DATABASE_URL": f"postgresql://postgres@127.0.0.1:5432/{template}",
        }
        for command in (["migrate", "--noinput"], ["demo_user"]):
            done = subprocess.run(
                [*MANAGE, *command], env=env, cwd=REPO_ROOT, capture_output=True, text=True
            )
            assert done.returncode == 0, done.stdout + done.stderr
        yield dbs
    finally:
        for name in [*dbs.created, template]:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@contextlib.contextmanager
def running_stack(
    name: str,
    workdir: Path,
    databases: Databases,
    *,
    webs: int,
    at_defaults: tuple[str, ...] = (),
    env: Mapping[str, str] | None = None,
    workers: int = 1,
    worker_ready_s: float = 90,
    workers_one_by_one: bool = False,
) -> Iterator[Stack]:
    """A started stack of `webs` web processes and `workers` workers on a Redis and a database
    of its own (a copy of the migrated template); every process is stopped and its output written to
    `workdir` at the end. `at_defaults`: ENV names left out, so the app uses its defaults;
    `env`: settings of this stack on top of ENV; `workers_one_by_one`: each worker ready before
    the next starts (vLLM workers: loading two models at once on 2 cores is slow and noisy)."""
    database = databases.fresh()
    redis_port = free_port()
    stack_env = {
        **base_env(workdir / "data"),
        **(env or {}),
        "DATABASE_URL": f"postgresql://postgres@127.0.0.1:5432/{database}",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
    }
    for name_at_default in at_defaults:
        stack_env.pop(name_at_default)
    stack = Stack(
        name=name,
        env=stack_env,
        redis_port=redis_port,
        database=database,
        logs_dir=workdir,
        worker_ready_s=worker_ready_s,
        workers_one_by_one=workers_one_by_one,
    )
    try:
        stack.start_redis()
        stack.start(webs=webs, workers=workers)
        yield stack
    finally:
        stack.stop()


# ---- the browser side -----------------------------------------------------------------------


@dataclass
class Answer:
    """What one socket showed of one answer."""

    message_id: str
    deltas: list[dict[str, Any]] = field(default_factory=list)
    snapshot: str | None = None
    end: dict[str, Any] | None = None
    arrivals: list[float] = field(default_factory=list)  # monotonic time of each frame
    shown: str = ""  # the text on screen: a snapshot replaces it, a delta appends
    started: int = 0  # `chat.started` frames (one per worker that started it)

    @property
    def seqs(self) -> list[int]:
        return [d["seq"] for d in self.deltas]

    @property
    def contiguous(self) -> bool:
        return self.seqs == list(range(1, len(self.deltas) + 1))

    def ended(self) -> dict[str, Any]:
        assert self.end is not None, f"answer {self.message_id} has not ended"
        return self.end

    def done_complete(self) -> str:
        """The text of an answer that ended with `chat.done` complete."""
        end = self.ended()
        assert end["type"] == "chat.done", end
        assert end["status"] == "complete", end
        return self.shown

    def add(self, frame: dict[str, Any]) -> None:
        if frame["type"] == "chat.delta":
            self.deltas.append(frame)
            self.shown += frame["text"]
        elif frame["type"] == "chat.snapshot":
            self.snapshot = self.shown = frame["content"]
        else:
            assert frame["type"] in ("chat.done", "chat.error"), frame
            self.end = frame


class Chat:
    """A logged-in browser tab: one WebSocket to one web process."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    @classmethod
    async def open(cls, host: str, session: str) -> Chat:
        return cls(await chat_socket(host, session, max_queue=None))

    async def close(self) -> None:
        await self.ws.close()

    async def send(self, frame: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(frame))

    async def recv(self, timeout: float) -> dict[str, Any]:
        frame: dict[str, Any] = json.loads(await asyncio.wait_for(self.ws.recv(), timeout))
        return frame

    async def reply(self, client_id: str, timeout: float = 15) -> dict[str, Any]:
        """The answer to a send: `chat.accepted`, or the error that refused it."""
        frame = await self.recv(timeout)
        assert frame["type"] in ("chat.accepted", "chat.error"), frame
        assert frame["id"] == client_id, frame
        return frame

    async def reply_of(self, kind: str, timeout: float = 15) -> dict[str, Any]:
        """The next frame of type `kind` (frames of other types before it are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            frame = await self.recv(max(0.01, deadline - time.monotonic()))
            if frame["type"] == kind:
                return frame

    async def accepted(self, frame: dict[str, Any]) -> dict[str, Any]:
        """Send and expect `chat.accepted`."""
        await self.send(frame)
        reply = await self.reply(frame["id"])
        assert reply["type"] == "chat.accepted", reply
        return reply

    async def ask(self, frame: dict[str, Any], timeout: float = 15) -> Answer:
        """Send, expect `chat.accepted`, and read the answer to its end."""
        accepted = await self.accepted(frame)
        return await self.follow(Answer(accepted["assistant_message_id"]), timeout=timeout)

    async def follow(
        self, answer: Answer, *, timeout: float, until_deltas: int | None = None
    ) -> Answer:
        """Read frames of `answer` until it ends (or has `until_deltas` deltas)."""
        deadline = time.monotonic() + timeout
        while answer.end is None:
            if until_deltas is not None and len(answer.deltas) >= until_deltas:
                break
            frame = await self.recv(max(0.01, deadline - time.monotonic()))
            assert frame.get("message_id") == answer.message_id, frame
            if frame["type"] == "chat.started":  # a worker took it: no text yet
                answer.started += 1
                continue
            answer.arrivals.append(time.monotonic())
            answer.add(frame)
        return answer


async def session_for(host: str) -> str:
    return await asyncio.to_thread(login, host, PASSWORD)


# ---- the stored side ------------------------------------------------------------------------


def db_connection(stack: Stack) -> psycopg.Connection[Any]:
    """A new autocommit connection to the stack's database."""
    return psycopg.connect(
        f"postgresql://postgres@127.0.0.1:5432/{stack.database}", autocommit=True
    )


def db_value(stack: Stack, sql: str, *params: Any) -> Any:
    """The first row of a query on the stack's database: one value, or the row's tuple."""
    with db_connection(stack) as db:
        row = db.execute(sql, params).fetchone()
    assert row is not None
    return row[0] if len(row) == 1 else row


def stored(stack: Stack, message_id: str) -> tuple[str, str, str]:
    """(status, error_code, content) of a message."""
    row: tuple[str, str, str] = db_value(
        stack,
        "SELECT status, error_code, content FROM conversations_message WHERE id = %s",
        message_id,
    )
    return row


def stored_when_ended(stack: Stack, message_id: str, timeout: float) -> tuple[str, str, str]:
    """The message once it is no longer `streaming` (fails after `timeout`)."""
    row: tuple[str, str, str] = wait_until(
        f"message {message_id} to stop streaming",
        lambda: (r := stored(stack, message_id))[0] != "streaming" and r,
        timeout,
        interval=0.1,
    )
    return row


def messages_in(stack: Stack, conversation_id: str) -> int:
    count: int = db_value(
        stack,
        "SELECT count(*) FROM conversations_message WHERE conversation_id = %s",
        conversation_id,
    )
    return count


async def workers_become(
    stack: Stack, check: Callable[[dict[str, int]], bool], what: str, timeout: float
) -> dict[str, int]:
    """Poll the worker registry (in the stack's Redis) until `check` holds."""
    deadline = time.monotonic() + timeout
    while True:
        registry = RedisWorkerRegistry(redis_url=stack.redis_url)
        try:
            workers = await registry.live_workers()
        finally:
            await registry.aclose()
        if check(workers):
            return workers
        if time.monotonic() > deadline:
            raise AssertionError(f"the registry never showed {what}; last: {workers}")
        await asyncio.sleep(0.1)
