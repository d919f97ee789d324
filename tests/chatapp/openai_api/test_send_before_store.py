"""An API request is queued before its turn is written, like a chat send (`runs.send_run_start`):
the write is off the first token's path, and nothing is lost or doubled either way it goes.

The write is made slow or failing by wrapping `services.turn_start`, the one place a new
question's rows are written.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.db import OperationalError

from chatapp.answers.runtime import answer_runtime
from chatapp.conversations import services
from chatapp.conversations.models import Message
from tests.chatapp.openai_api.conftest import Key, chat
from tests.conftest import RunningWorker
from tests.support.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "where is my parcel number 7"


def _wrapped(monkeypatch: pytest.MonkeyPatch, around: Callable[..., Any]) -> None:
    real = services.turn_start
    monkeypatch.setattr(services, "turn_start", lambda **kwargs: around(real, **kwargs))


async def test_the_worker_starts_before_the_question_is_stored_and_the_answer_is_whole(
    http: httpx.AsyncClient,
    api_key: Key,
    scripted_worker: RunningWorker,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    accepted_at_write: list[int] = []

    def slow(real: Callable[..., services.TurnStart], **kwargs: Any) -> services.TurnStart:
        time.sleep(0.4)  # the scripted worker takes the request meanwhile
        accepted_at_write.append(scripted_worker.worker.requests_accepted)
        return real(**kwargs)

    _wrapped(monkeypatch, slow)
    before = scripted_worker.worker.requests_accepted
    response = await http.post("/v1/chat/completions", json=chat(QUESTION), headers=api_key.headers)

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["choices"][0]["message"]["content"] == f"You said: {QUESTION}"
    assert body["choices"][0]["finish_reason"] == "stop"
    assert accepted_at_write == [before + 1]  # a worker had it before the write finished
    stored = await sync_to_async(Message.objects.get)(
        id=uuid.UUID(body["id"].removeprefix("chatcmpl-"))
    )
    assert (stored.status, stored.content) == ("complete", f"You said: {QUESTION}")


async def test_a_failed_write_is_an_error_stores_nothing_and_stops_the_run(
    http: httpx.AsyncClient,
    api_key: Key,
    scripted_worker: RunningWorker,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def failing(real: Callable[..., services.TurnStart], **kwargs: Any) -> services.TurnStart:
        raise OperationalError("disk I/O error")

    _wrapped(monkeypatch, failing)
    slow_question = "[[slow]] " + " ".join(["word"] * 60)
    response = await http.post(
        "/v1/chat/completions", json=chat(slow_question), headers=api_key.headers
    )

    assert response.status_code == 503  # the database is down: the client is told to retry
    assert response.json()["error"]["code"] == "database_unavailable"
    assert int(response.headers["Retry-After"]) >= 1
    assert await sync_to_async(Message.objects.count)() == 0
    runtime = await answer_runtime()
    # freed before the client hears (it may ask again at once), not when the abort lands
    assert await runtime.admission.outstanding() == 0
    await until(
        lambda: runtime.relay.active_answers == 0 and scripted_worker.worker.active_requests == 0
    )
    assert runtime.relay.active_answers == 0  # the queued run was stopped, its slot freed
    assert scripted_worker.worker.active_requests == 0
