"""A structured (JSON-schema) answer whose worker dies is not moved: the new worker would
start a second JSON document after the half-written one and return both as complete. It fails
clearly (503 `worker_lost`, retry-after) instead, as Dynamo does (issue 31, defect 6)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.chatapp.openai_api.conftest import Key, chat
from tests.chatapp.realtime.test_migration import Workers, _until_running, workers

pytestmark = pytest.mark.django_db(transaction=True)

__all__ = ["workers"]  # the fixture: two scripted workers in process

SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "order",
        "schema": {"type": "object", "properties": {"id": {"type": "string"}}},
    },
}


async def test_a_json_answer_whose_worker_dies_fails_instead_of_moving(
    http: httpx.AsyncClient, api_key: Key, workers: Workers
) -> None:
    await workers.start(2)
    question = "[[slow]] " + " ".join(f"w{i}" for i in range(40))
    asked = asyncio.create_task(
        http.post(
            "/v1/chat/completions",
            json=chat(question, response_format=SCHEMA),
            headers=api_key.headers,
        )
    )
    serving = await _until_running(workers)
    await asyncio.sleep(0.4)  # part of the document is written
    await workers.kill(serving)
    response = await asyncio.wait_for(asked, 20)

    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "worker_lost"
    assert workers.engines[1 - serving].prompts == []  # never continued on the other worker
