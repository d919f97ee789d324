"""PostgreSQL connections stay bounded and outages are clear, on real processes.

The compose topology (`bench/db_load.py` starts it): one web process (`manage.py serve
--no-worker`), one scripted worker, a private redis-server and a fresh PostgreSQL database.

1. 50 concurrent clients, 300 requests each on pages, `/api/`, `/v1` and the chat socket: no
   error at all, and the web process never holds more connections than its pool allows
   (counted in `pg_stat_activity`). Before the pool, the same load failed 107 of 1,200
   requests with "too many clients" and left 98 connections open.
2. The pool exhausted (requests stuck behind a lock hold every connection), then the database
   refusing connections: pages, `/api/`, `/v1` and the socket answer a clear 503 /
   `unavailable` with a retry-after within seconds; once the database is back the same socket
   frame, sent again, is answered exactly once, and no admission slot was left taken.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from bench.db_load import PG_ADMIN, Stack, drive, running_stack, served_model
from tests.integration.processes import chat_socket

pytestmark = [pytest.mark.redis, pytest.mark.asyncio(loop_scope="session")]

POOL_MAX = 8


@pytest.fixture(scope="module")
def postgres() -> None:
    try:
        psycopg.connect(PG_ADMIN, autocommit=True).close()
    except psycopg.OperationalError as exc:
        pytest.fail(f"these tests need PostgreSQL on 127.0.0.1:5432 (.ci/run starts it): {exc}")


@pytest.fixture
def load_stack(postgres: None, tmp_path: Path) -> Iterator[Stack]:
    with running_stack(workdir=tmp_path, extra_env={"DB_POOL_MAX_SIZE": str(POOL_MAX)}) as stack:
        yield stack


@pytest.fixture
def outage_stack(postgres: None, tmp_path: Path) -> Iterator[Stack]:
    env = {
        "DB_POOL_MAX_SIZE": "2",
        "DB_POOL_MIN_SIZE": "1",
        "DB_POOL_TIMEOUT_S": "1",
        # one answer at a time: a slot left taken by a failed send would refuse the retry
        "CHAT_USER_MAX_CONCURRENT": "1",
        "CHAT_BUSY_RETRY_AFTER_S": "2",
    }
    with running_stack(workdir=tmp_path, extra_env=env) as stack:
        yield stack


async def test_fifty_clients_get_no_errors_within_the_pool_bound(load_stack: Stack) -> None:
    result = await drive(stack=load_stack, model=served_model(load_stack), clients=50, requests=300)
    print("\n" + result.table())
    assert result.errors == 0, result.table() + "\n" + load_stack.web.log_text()[-3000:]
    assert all(s.requests == 300 for s in result.surfaces.values())
    assert 0 < result.peak_connections <= POOL_MAX, result.table()


def _admin() -> psycopg.Connection[Any]:
    return psycopg.connect(PG_ADMIN, autocommit=True)


async def _socket(stack: Stack) -> Any:
    return await chat_socket(stack.base_url.removeprefix("http://"), stack.session)


async def _send(ws: Any, client_id: str) -> list[dict[str, Any]]:
    await ws.send(json.dumps({"type": "chat.send", "id": client_id, "text": "Where is my order?"}))
    frames = []
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 20))
        frames.append(frame)
        if frame["type"] in ("chat.done", "chat.error"):
            return frames


async def _assert_unavailable(stack: Stack, http: httpx.AsyncClient, ws: Any, model: str) -> None:
    """Every surface says "unavailable, retry" quickly; nothing is stored for the send."""
    started = time.monotonic()
    page = await http.get("/")
    assert page.status_code == 503, page.text[:300]
    assert "Briefly unavailable" in page.text
    assert int(page.headers["Retry-After"]) >= 1
    api = await http.get("/api/templates/")
    assert api.status_code == 503
    assert api.json()["error"]["code"] == "unavailable"
    v1 = await http.post(
        "/v1/chat/completions",
        headers={"Authorization": f"Bearer {stack.api_key}"},
        json={"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
    )
    assert v1.status_code == 503, v1.text[:300]
    assert v1.json()["error"]["code"] == "database_unavailable"
    assert v1.json()["error"]["type"] == "service_unavailable_error"
    assert "Retry-After" in v1.headers
    [error] = await _send(ws, str(uuid.uuid4()))
    assert (error["type"], error["code"]) == ("chat.error", "unavailable"), error
    assert error["retry_after_s"] >= 1
    # four requests, each bounded by the 1 s pool wait (plus a connect attempt)
    assert time.monotonic() - started < 20


def _messages_with_client_id(database: str, client_id: str) -> int:
    with psycopg.connect(
        f"postgresql://postgres@127.0.0.1:5432/{database}", autocommit=True
    ) as conn:
        row = conn.execute(
            "SELECT count(*) FROM conversations_message WHERE client_message_id = %s",
            (client_id,),
        ).fetchone()
        return int(row[0]) if row else 0


async def test_exhausted_pool_and_refused_database_answer_unavailable_then_recover(
    outage_stack: Stack,
) -> None:
    stack = outage_stack
    model = served_model(stack)
    async with httpx.AsyncClient(
        base_url=stack.base_url, cookies={"sessionid": stack.session}, timeout=30
    ) as http:
        ws = await _socket(stack)
        try:
            # -- the pool exhausted: two requests wait on a lock, each holding a connection
            locker = psycopg.connect(
                f"postgresql://postgres@127.0.0.1:5432/{stack.database}", autocommit=False
            )
            locker.execute("LOCK TABLE conversations_conversation IN ACCESS EXCLUSIVE MODE")
            stuck = [asyncio.create_task(http.get("/api/conversations/")) for _ in range(2)]
            await asyncio.sleep(1.0)  # both have their connection and wait for the lock
            await _assert_unavailable(stack, http, ws, model)
            locker.rollback()  # the lock goes: the stuck requests finish normally
            assert [r.status_code for r in await asyncio.gather(*stuck)] == [200, 200]
            locker.close()

            # -- the database refuses connections (and the pooled ones are cut)
            with _admin() as admin:
                admin.execute(f'ALTER DATABASE "{stack.database}" WITH ALLOW_CONNECTIONS false')
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                    (stack.database,),
                )
                try:
                    await _assert_unavailable(stack, http, ws, model)
                    client_id = str(uuid.uuid4())
                    [error] = await _send(ws, client_id)
                    assert error["code"] == "unavailable"
                finally:
                    admin.execute(f'ALTER DATABASE "{stack.database}" WITH ALLOW_CONNECTIONS true')

            # -- back: the pool reconnects by itself; the refused send is answered once
            deadline = time.monotonic() + 30
            while (await http.get("/api/templates/")).status_code != 200:
                assert time.monotonic() < deadline, "the web process did not recover"
                await asyncio.sleep(0.5)
            assert _messages_with_client_id(stack.database, client_id) == 0
            frames = await _send(ws, client_id)
            assert frames[0]["type"] == "chat.accepted", frames
            assert frames[-1]["type"] == "chat.done", frames
            again = await _send(ws, client_id)  # a retry shows the same answer, never a second
            assert again[-1]["type"] == "chat.done"
            assert _messages_with_client_id(stack.database, client_id) == 1
            assert (await http.get("/")).status_code == 200
        finally:
            await ws.close()
