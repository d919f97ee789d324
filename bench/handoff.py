"""A person's messages, customer <-> agent, across two web processes: how long each takes.

The Redis topology on real processes: two web processes (`manage.py serve --no-worker`), a
private redis-server (the channel layer that carries the messages between them) and a fresh
PostgreSQL database. The customer (the demo user's chat socket) is on web A, the agent (the
console's socket, `/ws/agent/`) on web B; the agent has taken the customer's conversation.
Each round the customer writes and the bench times it until the console has it, then the
agent replies and the bench times it until the customer's socket has it. Both are stored
before they are sent (chatapp/handoff/events.py), so each time includes a database write.

    .venv/bin/python -m bench.handoff [--rounds 200] [--drafts 10]

Reported: P50 / P95 / max of each direction and of the round trip, in ms. With `--drafts N`,
then an inference worker with the default model starts (`python -m inference`, vLLM on CPU)
and, N times, the customer writes and the bench times it until the console has the first
token of the model's reply draft (docs/handoff.md), then waits for the draft's end. The message
rounds run before the worker starts, so no draft competes with them for the CPU.
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
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import websockets

from bench.db_load import PG_ADMIN
from bench.harness import DEFAULT_MODEL_DIR, ServerProcess, demo_login, free_port, percentile
from chatapp.handoff import intents_training

REPO = Path(__file__).resolve().parents[1]
PASSWORD = "handoff-bench-pw-123"  # noqa: S105  # throwaway users of a throwaway database
AGENT_PASSWORD = "handoff-agent-pw-123"  # noqa: S105
ENV = {
    "DJANGO_SETTINGS_MODULE": "chatapp.settings.local",
    "DEMO_PASSWORD": PASSWORD,
    "DEBUG": "0",
    "PYTHONUNBUFFERED": "1",
    "INFERENCE_METRICS_PORT": "0",
    "CHAT_SOCKET_FRAMES_PER_S": "0",  # the bench writes faster than a person
}
_AGENT = f"""
from django.contrib.auth.models import Group, User
u = User.objects.create_user("dana", password={AGENT_PASSWORD!r}, first_name="Dana", is_staff=True)
u.groups.add(Group.objects.get_or_create(name="Agents")[0])
"""


async def _next(ws: Any, kind: str, wait_s: float = 10) -> dict[str, Any]:
    while True:
        frame: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), wait_s))
        if frame["type"] == kind:
            return frame


def _headers(host: str, session: str) -> dict[str, str]:
    return {"Cookie": f"sessionid={session}", "Origin": f"http://{host}"}


@contextlib.asynccontextmanager
async def _sockets(
    host_a: str, host_b: str, customer: str, agent: str
) -> AsyncIterator[tuple[Any, Any]]:
    """The customer's chat socket on web A and the agent's console socket on web B."""
    async with (
        websockets.connect(
            f"ws://{host_a}/ws/chat/", additional_headers=_headers(host_a, customer)
        ) as chat,
        websockets.connect(
            f"ws://{host_b}/ws/agent/", additional_headers=_headers(host_b, agent)
        ) as desk,
    ):
        yield chat, desk


async def _drafts(
    host_a: str, host_b: str, customer: str, agent: str, conversation: str, rounds: int
) -> list[float]:
    """The customer writes -> the first token of the model's draft in the console (ms)."""
    firsts: list[float] = []
    async with _sockets(host_a, host_b, customer, agent) as (chat, desk):
        await _next(desk, "agent.queue")
        for n in range(rounds):
            text = f"My order {n} has not arrived yet, what can I do?"
            started = time.perf_counter()
            await chat.send(
                json.dumps(
                    {
                        "type": "chat.send",
                        "id": str(uuid.uuid4()),
                        "conversation_id": conversation,
                        "text": text,
                    }
                )
            )
            frame = await _next(desk, "agent.draft", wait_s=120)
            if frame["status"] != "streaming":
                raise RuntimeError(f"no draft: {frame}")
            firsts.append((time.perf_counter() - started) * 1000)
            while frame["status"] == "streaming":
                frame = await _next(desk, "agent.draft", wait_s=120)
    return firsts


async def _rounds(
    host_a: str, host_b: str, customer: str, agent: str, conversation: str, rounds: int
) -> tuple[list[float], list[float]]:
    to_agent: list[float] = []
    to_customer: list[float] = []
    async with _sockets(host_a, host_b, customer, agent) as (chat, desk):
        await chat.send(
            json.dumps(
                {
                    "type": "chat.handoff",
                    "id": str(uuid.uuid4()),
                    "conversation_id": conversation,
                    "action": "request",
                }
            )
        )
        await _next(chat, "chat.handoff_state")
        handoff = await _next(desk, "agent.queue")
        while not handoff["items"]:
            handoff = await _next(desk, "agent.queue")
        handoff_id = handoff["items"][0]["handoff_id"]
        await desk.send(
            json.dumps({"type": "agent.claim", "id": str(uuid.uuid4()), "handoff_id": handoff_id})
        )
        await _next(chat, "chat.handoff_state")
        for n in range(rounds):
            started = time.perf_counter()
            await chat.send(
                json.dumps(
                    {
                        "type": "chat.send",
                        "id": str(uuid.uuid4()),
                        "conversation_id": conversation,
                        "text": f"question {n}",
                    }
                )
            )
            while (await _next(desk, "agent.message"))["message"]["content"] != f"question {n}":
                pass
            to_agent.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            await desk.send(
                json.dumps(
                    {
                        "type": "agent.send",
                        "id": str(uuid.uuid4()),
                        "handoff_id": handoff_id,
                        "text": f"reply {n}",
                    }
                )
            )
            while (await _next(chat, "chat.human"))["message"]["content"] != f"reply {n}":
                pass
            to_customer.append((time.perf_counter() - started) * 1000)
    return to_agent, to_customer


def run(rounds: int, drafts: int, model_dir: Path) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="bench-handoff-"))
    database = f"chat_handoff_{uuid.uuid4().hex[:8]}"
    admin = psycopg.connect(PG_ADMIN, autocommit=True)
    admin.execute(f'CREATE DATABASE "{database}"')
    redis_port = free_port()
    inherited = ("SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL")
    env = {
        **{k: v for k, v in os.environ.items() if k not in inherited},
        **ENV,
        "CHAT_DATA_DIR": str(workdir / "data"),
        "DATABASE_URL": f"postgresql://postgres@127.0.0.1:5432/{database}",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "MODEL": str(model_dir),
    }
    manage = [sys.executable, str(REPO / "manage.py")]
    redis = ServerProcess(
        args=["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", ""],
        env=env,
        log_path=workdir / "redis.log",
    )
    ports = [free_port(), free_port()]
    webs = [
        ServerProcess(
            args=[*manage, "serve", "--no-worker", "--port", str(port)],
            env=env,
            log_path=workdir / f"web-{port}.log",
        )
        for port in ports
    ]
    worker = ServerProcess(
        args=[sys.executable, "-m", "inference"],
        env={**env, "CHAT_DATA_DIR": str(REPO / "data")},  # this machine's prepared models
        log_path=workdir / "worker.log",
    )
    draft_ms: list[float] = []
    # as on a machine that started before: a first start trains handoff's word questions
    # once, in a child of each web process (seconds of CPU beside the first messages)
    started = time.perf_counter()
    intents_training.train_missing(workdir / "data" / "intents")
    print(f"handoff intents trained once: {time.perf_counter() - started:.1f} s", flush=True)
    try:
        redis.start()
        for command in (["migrate", "--noinput"], ["demo_user"], ["shell", "-c", _AGENT]):
            subprocess.run([*manage, *command], env=env, cwd=REPO, check=True, capture_output=True)
        for web in webs:
            web.start()
        for web in webs:
            deadline = time.monotonic() + 90
            while "Serving on" not in web.log_text():
                web.check_alive()
                if time.monotonic() > deadline:
                    raise TimeoutError("a web process did not start")
                time.sleep(0.2)
        host_a, host_b = (f"127.0.0.1:{port}" for port in ports)
        customer = demo_login(f"http://{host_a}", PASSWORD)
        agent = demo_login(f"http://{host_b}", AGENT_PASSWORD, username="dana")
        conversation = str(uuid.uuid4())
        with psycopg.connect(
            f"postgresql://postgres@127.0.0.1:5432/{database}", autocommit=True
        ) as db:
            owner = db.execute("SELECT id FROM auth_user WHERE username = 'demo'").fetchone()
            assert owner is not None
            db.execute(
                "INSERT INTO conversations_conversation"
                " (id, owner_id, title, created_at, updated_at)"
                " VALUES (%s, %s, 'bench', now(), now())",
                (conversation, owner[0]),
            )
        to_agent, to_customer = asyncio.run(
            _rounds(host_a, host_b, customer, agent, conversation, rounds)
        )
        if drafts:
            worker.start()
            deadline = time.monotonic() + 600
            while "Inference worker ready" not in worker.log_text():
                worker.check_alive()
                if time.monotonic() > deadline:
                    raise TimeoutError("the worker did not get ready")
                time.sleep(0.5)
            draft_ms = asyncio.run(_drafts(host_a, host_b, customer, agent, conversation, drafts))
    finally:
        for server in (*webs, worker, redis):
            server.stop(timeout_s=10)
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.close()
    trips = [a + b for a, b in zip(to_agent, to_customer, strict=True)]
    print(f"handoff messages across two web processes, {rounds} rounds (ms):")
    print("| direction | P50 | P95 | max |\n|---|---:|---:|---:|")
    for name, values in (
        ("customer -> console", to_agent),
        ("console -> customer", to_customer),
        ("round trip", trips),
    ):
        print(
            f"| {name} | {percentile(values, q=0.5):.1f} | {percentile(values, q=0.95):.1f} "
            f"| {max(values):.1f} |"
        )
    if draft_ms:
        print(
            f"| customer writes -> first draft token in the console ({len(draft_ms)} drafts, "
            f"{model_dir.name}) | {percentile(draft_ms, q=0.5):.1f} "
            f"| {percentile(draft_ms, q=0.95):.1f} | {max(draft_ms):.1f} |"
        )
        print("draft first-token samples in order (ms): " + ", ".join(f"{v:.0f}" for v in draft_ms))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.handoff", description=__doc__)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--drafts", type=int, default=0)
    parser.add_argument("--model-dir", type=Path, default=DEFAULT_MODEL_DIR)
    args = parser.parse_args(argv)
    return run(args.rounds, args.drafts, args.model_dir.resolve())


if __name__ == "__main__":
    raise SystemExit(main())
