"""Web and inference worker as two real processes over the real Redis and PostgreSQL.

This is the multi-process topology of the README: `manage.py serve --no-worker` (daphne) and
`python -m inference` (vLLM on the tiny model), talking only through the Redis channel layer.
A real WebSocket client logs in through the login form and chats.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from tests.integration.processes import (
    MANAGE,
    chat_send,
    chat_socket,
    frames_until,
    keep_draining,
    login,
    manage_run,
    prepared_verifier_env,
    processes_stop,
    repo_process,
    wait_for_line,
)
from tests.support.net import free_port

pytestmark = [pytest.mark.vllm, pytest.mark.redis, pytest.mark.asyncio(loop_scope="session")]

REDIS_URL = "redis://127.0.0.1:6379/7"
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
PASSWORD = "two-process-pw-123"


@pytest.fixture(scope="module")
def topology(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    try:
        redis.Redis.from_url(REDIS_URL).flushdb()
        admin = psycopg.connect(PG_ADMIN, autocommit=True)
    except (redis.ConnectionError, psycopg.OperationalError) as exc:
        pytest.fail(
            f"this test needs Redis and PostgreSQL on 127.0.0.1 (.ci/run starts them): {exc}"
        )
    db_name = f"chat_it_{uuid.uuid4().hex[:8]}"
    admin.execute(f'CREATE DATABASE "{db_name}"')
    data_dir = tmp_path_factory.mktemp("two-proc-data")
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "chatapp.settings.local",
        "DATABASE_URL": f"postgresql://postgres@127.0.0.1:5432/{db_name}",
        "REDIS_URL": REDIS_URL,
        "CHAT_DATA_DIR": str(data_dir),
        "MODEL": str(tiny_model),
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_MAX_MODEL_LEN": "2048",
        "CHAT_MAX_TOKENS": "16",
        "DEMO_PASSWORD": PASSWORD,
        "DEBUG": "0",
        "PYTHONUNBUFFERED": "1",
        **prepared_verifier_env(),  # the worker has the FAQ cache on by default
    }
    # vLLM's compile caches live under the data dir: share the session's so startup stays fast
    env["VLLM_CACHE_ROOT"] = str(tiny_model.parent.parent / "cache" / "vllm")
    manage_run(env, ["migrate", "--noinput"], ["demo_user"])
    procs: list[subprocess.Popen[str]] = []
    try:
        worker = repo_process([sys.executable, "-m", "inference"], env)
        procs.append(worker)
        web = repo_process([*MANAGE, "serve", "--port", str(port), "--no-worker"], env)
        procs.append(web)
        wait_for_line(web, r"Serving on", 60)
        wait_for_line(worker, r"Inference worker ready", 240)
        keep_draining(web)
        keep_draining(worker)
        yield f"127.0.0.1:{port}"
    finally:
        processes_stop(procs, timeout=30)
        admin.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        admin.close()


async def test_a_chat_streams_across_web_and_worker_processes(topology: str) -> None:
    session = await asyncio.to_thread(login, topology, PASSWORD)
    async with chat_socket(topology, session) as ws:
        await ws.send("{definitely not json")
        error = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert (error["type"], error["code"]) == ("chat.error", "bad_json")

        await ws.send(chat_send("Where is my order?"))
        frames = await frames_until(ws, "chat.done")
        assert frames[0]["type"] == "chat.accepted"
        assert frames[-1]["type"] == "chat.done", frames[-1]
        deltas = [f for f in frames if f["type"] == "chat.delta"]
        assert deltas
        assert [d["seq"] for d in deltas] == list(range(1, len(deltas) + 1))
        assert 0 < frames[-1]["usage"]["completion_tokens"] <= 16

        # a follow-up in the same conversation carries the history to the worker
        await ws.send(
            json.dumps(
                {
                    "type": "chat.send",
                    "id": str(uuid.uuid4()),
                    "conversation_id": frames[0]["conversation_id"],
                    "text": "And when will it arrive?",
                }
            )
        )
        follow_up = await frames_until(ws, "chat.done")
        assert follow_up[-1]["type"] == "chat.done"
        assert follow_up[-1]["usage"]["prompt_tokens"] > frames[-1]["usage"]["prompt_tokens"]
