"""`manage.py serve` in the embedded default: one process, in-memory layer, worker inside.

Uses the scripted engine so it runs in seconds; the point here is the process wiring (the
worker starts inside daphne's running event loop, static files are served, the socket works).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.processes import (
    app_served,
    chat_send,
    chat_socket,
    frames_until,
    local_env,
    login,
    manage_run,
    prepared_verifier_env,
    serve_until_exit,
)

PASSWORD = "embedded-pw-123"


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir = tmp_path_factory.mktemp("embedded-data")
    env = local_env(
        data_dir,
        {
            "INFERENCE_ENGINE": "scripted",
            "DEMO_PASSWORD": PASSWORD,
            **prepared_verifier_env(),  # the embedded default has the FAQ cache on
        },
    )
    manage_run(env, ["migrate", "--noinput"], ["demo_user"])
    with app_served(env=env, ready_timeout=60) as served:
        yield f"127.0.0.1:{served.port}"


def test_static_assets_are_served(embedded: str) -> None:
    for asset in ("/static/chat.js", "/static/chat.css"):
        response = httpx.get(f"http://{embedded}{asset}")
        assert response.status_code == 200, asset
        assert len(response.content) > 100


async def test_a_chat_answers_in_the_single_process_default(embedded: str) -> None:
    session = await asyncio.to_thread(login, embedded, PASSWORD)
    async with chat_socket(embedded, session) as ws:
        await ws.send(chat_send("ping pong"))
        frames = await frames_until(ws, "chat.done", timeout=20)
    assert frames[-1]["type"] == "chat.done"
    assert "".join(f["text"] for f in frames if f["type"] == "chat.delta") == "You said: ping pong"


def test_a_missing_model_is_a_clear_error_and_the_server_exits(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    env = local_env(
        data_dir,
        {"INFERENCE_ENGINE": "vllm", "MODEL": str(data_dir / "models" / "smollm2-135m-instruct")},
    )
    result = serve_until_exit(env)
    assert result.returncode == 1
    assert "error:" in result.stderr
    assert "python -m modelprep prepare" in result.stderr
