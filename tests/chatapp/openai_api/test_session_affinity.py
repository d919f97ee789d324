"""`X-Session-ID` on the OpenAI-compatible API: a client's session is routed like a chat
conversation (its turns to the worker that holds its prefix cache, and the header on to a
router in front of an OpenAI-compatible engine), per API key; a bad one is a 400 that names it.
Full ASGI app, scripted worker."""

from __future__ import annotations

import httpx
import pytest

from tests.chatapp.openai_api.conftest import Key, chat
from tests.conftest import RunningWorker

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_session_header_reaches_the_engine_per_api_key(
    http: httpx.AsyncClient, api_key: Key, scripted_worker: RunningWorker
) -> None:
    headers = {**api_key.headers, "X-Session-ID": "ticket-77"}
    assert (await http.post("/v1/chat/completions", json=chat("hello"), headers=headers)).is_success
    plain = await http.post("/v1/chat/completions", json=chat("again"), headers=api_key.headers)
    assert plain.is_success

    first, second = scripted_worker.engine.requests
    assert first.session_id == f"api{api_key.key.pk}:ticket-77"
    assert second.session_id is None  # no header: no affinity, nothing sent on


async def test_a_malformed_session_header_is_refused_with_its_name(
    http: httpx.AsyncClient, api_key: Key, scripted_worker: RunningWorker
) -> None:
    bad = await http.post(
        "/v1/chat/completions",
        json=chat("hello"),
        headers={**api_key.headers, "X-Session-ID": "x" * 65},
    )
    assert bad.status_code == 400
    assert bad.json()["error"]["param"] == "X-Session-ID"
    assert scripted_worker.engine.requests == []
