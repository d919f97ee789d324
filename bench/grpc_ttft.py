"""Time to first token over gRPC, /v1 (server-sent events) and the WebSocket, side by side.

    .venv/bin/python -m bench.grpc_ttft [--rounds 40] [--engine vllm|scripted]

One stack (Redis db 11, one inference worker, one web process, one gRPC process, SQLite) and
one client process. Each round asks the three transports the same new question, in an order
that rotates round by round, one at a time, so each transport meets the same engine state
(prefix cache, load) as often as the others. TTFT is from sending the request to the first
token's text on the client. The default engine is vLLM on the packaged SmolLM2 (the CPU
product); `scripted` measures the pipeline alone. Results on stdout and in
bench/results/grpc_ttft-*.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
import websockets

from bench.harness import (
    REPO_ROOT,
    ServerProcess,
    chat_send,
    command_line,
    demo_login,
    free_port,
    machine,
    percentile,
    timestamp,
    write_results,
)
from inference.settings import DEFAULT_MODEL_DIR_NAME

MODULE = "bench.grpc_ttft"
REDIS_URL = "redis://127.0.0.1:6379/11"
_SETUP = """
from django.contrib.auth.models import User
from chatapp.apikeys.services import api_key_create
user = User.objects.create_user("ttft", password="{password}")
print(api_key_create(user=user, name="ttft", rate_limit=100000, max_concurrent=8).secret)
"""


async def wait_for(server: ServerProcess, text: str, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in server.log_text():
        server.check_alive()
        if time.monotonic() > deadline:
            raise RuntimeError(f"{server.args[:4]} did not say {text!r} in {timeout_s:.0f} s")
        await asyncio.sleep(0.2)


async def over_socket(ws: Any, question: str) -> float:
    sent = time.perf_counter()
    await ws.send(json.dumps(chat_send(question)))
    first = 0.0
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 120))
        if frame["type"] == "chat.delta" and not first:
            first = time.perf_counter() - sent
        if frame["type"] in ("chat.done", "chat.error"):
            return first


async def over_v1(client: httpx.AsyncClient, key: str, model: str, question: str) -> float:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": question}],
        "max_tokens": 8,
        "stream": True,
    }
    sent = time.perf_counter()
    first = 0.0
    headers = {"Authorization": f"Bearer {key}"}
    async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as reply:
        async for line in reply.aiter_lines():
            if first or not line.startswith("data: {"):
                continue
            choices = json.loads(line.removeprefix("data: "))["choices"]
            if choices and choices[0]["delta"].get("content"):
                first = time.perf_counter() - sent
    return first


async def over_grpc(stub: Any, key: str, question: str) -> float:
    from chatapp.grpc_api.generated import chat_pb2

    send = chat_pb2.Send(client_id=str(uuid.uuid4()), text=question)
    send.sampling.max_tokens = 8
    sent = time.perf_counter()
    first = 0.0
    call = stub.Chat(metadata=[("authorization", f"Bearer {key}")])
    await call.write(chat_pb2.ClientEvent(send=send))
    async for event in call:
        kind = event.WhichOneof("event")
        if kind == "delta" and not first:
            first = time.perf_counter() - sent
        if kind in ("done", "error"):
            break
    await call.done_writing()
    return first


def stack_prepared(engine: str, folder: Path) -> tuple[dict[str, str], str, str]:
    """The stack's environment, migrated, with a user and an API key: (env, password, key)."""
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    # the prepared model of this checkout (`make prepare-model`); the stack's data is its own
    models = Path(os.environ.get("CHAT_DATA_DIR", REPO_ROOT / "data")) / "models"
    env.setdefault("MODEL", str(models / DEFAULT_MODEL_DIR_NAME))
    env.update(
        DJANGO_SETTINGS_MODULE="chatapp.settings.local",
        CHAT_DATA_DIR=str(folder),
        REDIS_URL=REDIS_URL,
        INFERENCE_ENGINE=engine,
        INFERENCE_FAQ="0",
        CHAT_FAQ_ENABLED="0",
        CHAT_USER_RATE="100000",
        # every answer 8 tokens long, whatever the transport (the socket has no max_tokens)
        CHAT_MAX_TOKENS="8",
        DEBUG="0",
        PYTHONUNBUFFERED="1",
    )
    password = secrets.token_urlsafe(12)
    for command in (["migrate", "--noinput"], ["shell", "-c", _SETUP.format(password=password)]):
        done = subprocess.run(
            [sys.executable, "manage.py", *command],
            cwd=REPO_ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
    return env, password, done.stdout.split()[-1]


async def measure(
    args: argparse.Namespace, folder: Path, env: dict[str, str], password: str, key: str
) -> dict[str, list[float]]:
    from chatapp.grpc_api.generated import chat_pb2_grpc

    manage = [sys.executable, "manage.py"]
    web_port, grpc_port = free_port(), free_port()
    servers = [
        ServerProcess(
            args=[sys.executable, "-m", "inference"], env=env, log_path=folder / "worker.log"
        ),
        ServerProcess(
            args=[*manage, "serve", "--port", str(web_port), "--no-worker"],
            env=env,
            log_path=folder / "web.log",
        ),
        ServerProcess(
            args=[sys.executable, "-m", "chatapp.grpc_api", "--port", str(grpc_port)],
            env=env,
            log_path=folder / "grpc.log",
        ),
    ]
    for server in servers:
        server.start()
    try:
        await wait_for(servers[0], "Inference worker ready")
        await wait_for(servers[1], "Serving on")
        await wait_for(servers[2], "gRPC Chat service on")
        base = f"http://127.0.0.1:{web_port}"
        session = await asyncio.to_thread(demo_login, base, password, "ttft")
        times: dict[str, list[float]] = {"grpc": [], "v1": [], "socket": []}
        async with (
            httpx.AsyncClient(base_url=base, timeout=120) as client,
            websockets.connect(
                f"ws://127.0.0.1:{web_port}/ws/chat/",
                additional_headers={"Cookie": f"sessionid={session}", "Origin": base},
            ) as ws,
            grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel,
        ):
            model = await client.get("/v1/models", headers={"Authorization": f"Bearer {key}"})
            model_id = model.json()["data"][0]["id"]
            stub = chat_pb2_grpc.ChatStub(channel)  # type: ignore[no-untyped-call]
            ways: dict[str, Callable[[str], Awaitable[float]]] = {
                "grpc": lambda q: over_grpc(stub, key, q),
                "v1": lambda q: over_v1(client, key, model_id, q),
                "socket": lambda q: over_socket(ws, q),
            }
            names = list(ways)
            for round_ in range(args.warmup + args.rounds):
                question = f"Question {round_}: name one colour of the sea."
                order = names[round_ % 3 :] + names[: round_ % 3]
                for name in order:
                    took = await ways[name](question)
                    if round_ >= args.warmup:
                        times[name].append(took * 1000)
        return times
    finally:
        for server in reversed(servers):
            server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--engine", choices=["vllm", "scripted"], default="vllm")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="grpc-ttft-") as folder:
        env, password, key = stack_prepared(args.engine, Path(folder))
        times = asyncio.run(measure(args, Path(folder), env, password, key))
    rows = [
        f"| {name} | {len(ms)} | {percentile(ms, q=0.5):.1f} | {percentile(ms, q=0.95):.1f} |"
        for name, ms in times.items()
    ]
    table = "\n".join(
        ["| transport | n | TTFT P50 ms | TTFT P95 ms |", "|---|---:|---:|---:|", *rows]
    )
    report = (
        f"# TTFT: gRPC vs /v1 vs WebSocket ({args.engine})\n\n"
        f"Command: `{command_line(module=MODULE)}` on {machine()}\n\n{table}\n"
    )
    print(report)
    write_results(
        name="grpc_ttft",
        stamp=timestamp(),
        markdown=report,
        report={"engine": args.engine, "machine": machine(), "ms": times},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
