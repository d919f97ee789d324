"""Database connections under concurrent load: does the web process stay within its bound?

The compose topology on real processes: one web process (`manage.py serve --no-worker`),
one scripted inference worker (`python -m inference`, no model: it answers "You said: ..."
word by word), a private redis-server and a fresh PostgreSQL database. `--clients` concurrent
clients drive four surfaces, `--requests` requests each: chat pages (`GET /`), the JSON API
(`GET /api/conversations/`, `/api/templates/`), the OpenAI-compatible API
(`POST /v1/chat/completions`) and the chat socket (`chat.send` until `chat.done`, one socket per
client). Meanwhile `pg_stat_activity` is sampled every 20 ms for the database's connections
(the bench's own sampling connection excluded). Reported: errors per surface, latency
percentiles and the peak connection count.

    .venv/bin/python -m bench.db_load --clients 50 --requests 300
    .venv/bin/python -m bench.db_load --env DB_POOL=0    # no pool: a connection per DB call

`tests/integration/test_database_pool.py` runs the same load in `make test` and asserts no
errors and a peak within the configured pool size.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import websockets

from bench.harness import ServerProcess, demo_login, free_port, percentile

REPO = Path(__file__).resolve().parents[1]
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
PASSWORD = "db-load-demo-pw-123"  # noqa: S105  # the throwaway demo user of a throwaway database
SURFACES = ("pages", "api", "v1", "socket")

_MAKE_KEY = """
from django.contrib.auth.models import User
from chatapp.apikeys.services import api_key_create
user, _ = User.objects.get_or_create(username="db-load")
print(api_key_create(user=user, name="db-load", rate_limit=1000000, max_concurrent=1000).secret)
"""

# Limits high enough that admission never refuses: this measures the database, not them.
_ENV = {
    "DJANGO_SETTINGS_MODULE": "chatapp.settings.local",
    "DEMO_PASSWORD": PASSWORD,
    "DEBUG": "0",
    "PYTHONUNBUFFERED": "1",
    "INFERENCE_ENGINE": "scripted",
    "INFERENCE_FAQ": "0",
    "CHAT_FAQ_ENABLED": "0",
    "INFERENCE_MAX_ACTIVE": "200",
    "INFERENCE_MAX_QUEUE": "200",
    "CHAT_USER_MAX_CONCURRENT": "1000",
    "CHAT_USER_RATE": "1000000",
    "CHAT_MAX_TOKENS": "6",
    "INFERENCE_METRICS_PORT": "0",
}


@dataclass
class Stack:
    """The running processes, where they listen, and what the clients need to log in."""

    base_url: str
    database: str
    api_key: str
    session: str
    web: ServerProcess
    worker: ServerProcess


@dataclass
class SurfaceResult:
    latencies_s: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)

    @property
    def requests(self) -> int:
        return len(self.latencies_s) + sum(self.errors.values())


@dataclass
class LoadResult:
    surfaces: dict[str, SurfaceResult]
    peak_connections: int
    wall_s: float

    @property
    def errors(self) -> int:
        return sum(sum(s.errors.values()) for s in self.surfaces.values())

    def table(self) -> str:
        lines = [
            "| surface | requests | errors | p50 ms | p95 ms |",
            "|---|---|---|---|---|",
        ]
        for name, s in self.surfaces.items():
            errors = ", ".join(f"{k}: {v}" for k, v in s.errors.most_common()) or "0"
            p50 = percentile(s.latencies_s, q=0.5) * 1000
            p95 = percentile(s.latencies_s, q=0.95) * 1000
            lines.append(f"| {name} | {s.requests} | {errors} | {p50:.0f} | {p95:.0f} |")
        lines.append("")
        lines.append(f"peak connections to the database: {self.peak_connections}")
        lines.append(f"wall time: {self.wall_s:.1f} s")
        return "\n".join(lines)


def _wait_for(server: ServerProcess, text: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in server.log_text():
        server.check_alive()
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {text!r} after {timeout_s} s:\n{server.log_text()[-3000:]}")
        time.sleep(0.1)


@contextlib.contextmanager
def running_stack(*, workdir: Path, extra_env: Mapping[str, str] = {}) -> Iterator[Stack]:
    """A fresh database, a private Redis, the web process and one scripted worker."""
    database = f"chat_dbload_{uuid.uuid4().hex[:8]}"
    admin = psycopg.connect(PG_ADMIN, autocommit=True)
    admin.execute(f'CREATE DATABASE "{database}"')
    redis_port = free_port()
    web_port = free_port()
    inherited = ("SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL")
    env = {
        **{k: v for k, v in os.environ.items() if k not in inherited},
        **_ENV,
        "CHAT_DATA_DIR": str(workdir / "data"),
        "DATABASE_URL": f"postgresql://postgres@127.0.0.1:5432/{database}",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        **extra_env,
    }
    redis = ServerProcess(
        args=["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", ""],
        env=env,
        log_path=workdir / "redis.log",
    )
    manage = [sys.executable, str(REPO / "manage.py")]
    web = ServerProcess(
        args=[*manage, "serve", "--no-worker", "--port", str(web_port)],
        env=env,
        log_path=workdir / "web.log",
    )
    worker = ServerProcess(
        args=[sys.executable, "-m", "inference"], env=env, log_path=workdir / "worker.log"
    )
    try:
        redis.start()
        for command in (["migrate", "--noinput"], ["demo_user"]):
            subprocess.run([*manage, *command], env=env, cwd=REPO, check=True, capture_output=True)
        key = subprocess.run(
            [*manage, "shell", "-c", _MAKE_KEY],
            env=env,
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()[-1]
        web.start()
        worker.start()
        _wait_for(web, "Serving on", 90)
        _wait_for(worker, "Inference worker ready", 90)
        base_url = f"http://127.0.0.1:{web_port}"
        yield Stack(
            base_url=base_url,
            database=database,
            api_key=key,
            session=demo_login(base_url, PASSWORD),
            web=web,
            worker=worker,
        )
    finally:
        for server in (web, worker, redis):
            server.stop(timeout_s=10)
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.close()


class ConnectionSampler:
    """Samples the database's connection count in a thread (the load runs in the loop)."""

    def __init__(self, *, database: str, interval_s: float = 0.02) -> None:
        self.database = database
        self.interval_s = interval_s
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ConnectionSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            while not self._stop.is_set():
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    (self.database,),
                ).fetchone()
                self.peak = max(self.peak, int(row[0]) if row else 0)
                self.samples += 1
                self._stop.wait(self.interval_s)


def connection_count(database: str) -> int:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchone()
        return int(row[0]) if row else 0


class _Client:
    """One simulated user: an HTTP client with the session, a socket opened on first use."""

    def __init__(self, stack: Stack, http: httpx.AsyncClient) -> None:
        self.stack = stack
        self.http = http
        self.ws: Any = None

    async def pages(self) -> None:
        reply = await self.http.get("/")
        _expect(reply, 200, text="<html")

    async def api(self) -> None:
        reply = await self.http.get("/api/conversations/")
        _expect(reply, 200)
        reply = await self.http.get("/api/templates/")
        _expect(reply, 200)

    async def v1(self) -> None:
        reply = await self.http.post(
            "/v1/chat/completions",
            headers={"Authorization": f"Bearer {self.stack.api_key}"},
            json={
                "model": self.http.headers.get("x-model", ""),
                "messages": [{"role": "user", "content": "Where is my order?"}],
                "max_tokens": 6,
            },
        )
        _expect(reply, 200)
        if not reply.json()["choices"][0]["message"]["content"]:
            raise _Failure("v1 empty answer")

    async def socket(self) -> None:
        if self.ws is None:
            host = self.stack.base_url.removeprefix("http://")
            self.ws = await websockets.connect(
                f"ws://{host}/ws/chat/",
                additional_headers={
                    "Cookie": f"sessionid={self.stack.session}",
                    "Origin": self.stack.base_url,
                },
                open_timeout=30,
            )
        frame = {"type": "chat.send", "id": str(uuid.uuid4()), "text": "Where is my order?"}
        await self.ws.send(json.dumps(frame))
        while True:
            reply = json.loads(await asyncio.wait_for(self.ws.recv(), 60))
            if reply["type"] == "chat.done":
                return
            if reply["type"] == "chat.error":
                raise _Failure(f"socket {reply['code']}")

    async def close(self) -> None:
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await self.ws.close()


class _Failure(Exception):
    pass


def _expect(reply: httpx.Response, status: int, *, text: str = "") -> None:
    if reply.status_code != status:
        code = ""
        with contextlib.suppress(Exception):
            code = " " + str(reply.json()["error"]["code"])
        raise _Failure(f"{reply.status_code}{code}")
    if text and text not in reply.text[:2000]:
        raise _Failure("unexpected body")


async def drive(*, stack: Stack, model: str, clients: int, requests: int) -> LoadResult:
    """`clients` concurrent users; each surface gets `requests` requests in all, mixed."""
    results = {name: SurfaceResult() for name in SURFACES}
    remaining = dict.fromkeys(SURFACES, requests)
    started = time.monotonic()

    async def user(index: int, http: httpx.AsyncClient) -> None:
        client = _Client(stack, http)
        turn = index
        try:
            while any(remaining.values()):
                name = SURFACES[turn % len(SURFACES)]
                turn += 1
                if remaining[name] <= 0:
                    continue
                remaining[name] -= 1
                t0 = time.monotonic()
                try:
                    await getattr(client, name)()
                except (_Failure, httpx.HTTPError, OSError, TimeoutError) as exc:
                    kind = str(exc) if isinstance(exc, _Failure) else type(exc).__name__
                    results[name].errors[kind] += 1
                    if name == "socket":
                        await client.close()
                        client.ws = None
                else:
                    results[name].latencies_s.append(time.monotonic() - t0)
        finally:
            await client.close()

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    with ConnectionSampler(database=stack.database) as sampler:
        async with contextlib.AsyncExitStack() as exits:
            https = [
                await exits.enter_async_context(
                    httpx.AsyncClient(
                        base_url=stack.base_url,
                        cookies={"sessionid": stack.session},
                        headers={"x-model": model},
                        timeout=60,
                        limits=limits,
                    )
                )
                for _ in range(clients)
            ]
            await asyncio.gather(*(user(i, https[i]) for i in range(clients)))
    return LoadResult(
        surfaces=results, peak_connections=sampler.peak, wall_s=time.monotonic() - started
    )


def served_model(stack: Stack) -> str:
    reply = httpx.get(
        f"{stack.base_url}/v1/models", headers={"Authorization": f"Bearer {stack.api_key}"}
    )
    reply.raise_for_status()
    return str(reply.json()["data"][0]["id"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=300, help="per surface")
    parser.add_argument(
        "--env", action="append", default=[], help="NAME=VALUE for the web process (repeat)"
    )
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.env)
    with (
        tempfile.TemporaryDirectory(prefix="db-load-") as tmp,
        running_stack(workdir=Path(tmp), extra_env=extra) as stack,
    ):
        idle = connection_count(stack.database)
        result = asyncio.run(
            drive(
                stack=stack, model=served_model(stack), clients=args.clients, requests=args.requests
            )
        )
        time.sleep(1.0)
        after = connection_count(stack.database)
        print(f"\n{args.clients} clients, {args.requests} requests per surface, env {extra}")
        print(result.table())
        print(f"connections idle before: {idle}, 1 s after: {after}")
        print(f"errors: {result.errors}")
        if result.errors:
            print(stack.web.log_text()[-3000:])


if __name__ == "__main__":
    main()
