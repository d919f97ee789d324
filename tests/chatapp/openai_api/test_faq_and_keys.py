"""FAQ answers through the API (with the real embedding model), and keys in Django admin."""

from __future__ import annotations

import re

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.test import Client

from chatapp.apikeys.models import ApiKey, key_hash
from chatapp.apikeys.selectors import api_key_authenticate
from tests.chatapp.openai_api.conftest import Key, chat, sse_events
from tests.support.admin import superuser_client
from tests.support.faq import ANSWER, FaqWorker

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_faq_hit_is_a_normal_completion_with_the_faq_marker(
    http: httpx.AsyncClient, api_key: Key, faq_worker: FaqWorker
) -> None:
    entry = await faq_worker.entry_cached()

    response = await http.post(
        "/v1/chat/completions", json=chat("how can I reset my password"), headers=api_key.headers
    )
    body = response.json()
    assert response.status_code == 200
    assert body["choices"][0]["message"]["content"] == ANSWER
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["system_fingerprint"] == "faq"
    assert body["x_faq"] == {"entry_id": entry.pk}
    assert response.headers["X-Answer-Source"] == "faq"

    streamed = await http.post(
        "/v1/chat/completions",
        json=chat("how can I reset my password", stream=True),
        headers=api_key.headers,
    )
    chunks = sse_events(streamed.text)[:-1]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == ANSWER
    assert chunks[-1]["x_faq"] == {"entry_id": entry.pk}
    assert chunks[-1]["system_fingerprint"] == "faq"
    await sync_to_async(entry.refresh_from_db)()
    assert entry.hit_count == 2


async def test_faq_false_and_follow_ups_go_to_the_model(
    http: httpx.AsyncClient, api_key: Key, faq_worker: FaqWorker
) -> None:
    await faq_worker.entry_cached()

    skipped = await http.post(
        "/v1/chat/completions",
        json=chat("how can I reset my password", faq=False),
        headers=api_key.headers,
    )
    assert skipped.json()["choices"][0]["message"]["content"].startswith("You said:")
    assert "x_faq" not in skipped.json()
    assert skipped.headers["X-Answer-Source"] == "model"

    follow_up = chat("how can I reset my password")
    follow_up["messages"] = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "Hi, how can I help?"},
        *follow_up["messages"],
    ]
    answer = await http.post("/v1/chat/completions", json=follow_up, headers=api_key.headers)
    assert answer.json()["choices"][0]["message"]["content"].startswith("You said:")


async def test_requests_an_faq_answer_cannot_honour_go_to_the_model(
    http: httpx.AsyncClient, api_key: Key, faq_worker: FaqWorker
) -> None:
    await faq_worker.entry_cached()
    question = "how can I reset my password"
    hit = await http.post("/v1/chat/completions", json=chat(question), headers=api_key.headers)
    assert hit.headers["X-Answer-Source"] == "faq"

    # an FAQ answer has no logprobs, is not JSON, ignores biases and may hold a stop string
    for fields in (
        {"response_format": {"type": "json_object"}},
        {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
        {"logprobs": True},
        {"logit_bias": {"5": 1}},
        {"stop": ["zzz"]},
    ):
        answer = await http.post(
            "/v1/chat/completions", json=chat(question, **fields), headers=api_key.headers
        )
        assert answer.headers["X-Answer-Source"] == "model", fields
        assert answer.json()["choices"][0]["message"]["content"].startswith("You said:")
    # the neutral values still allow the FAQ
    neutral = chat(question, response_format={"type": "text"}, logprobs=False, stop=[])
    again = await http.post("/v1/chat/completions", json=neutral, headers=api_key.headers)
    assert again.headers["X-Answer-Source"] == "faq"


# ---- keys in the admin ---------------------------------------------------------------------


@pytest.fixture
def admin_client() -> Client:
    return superuser_client()


def test_a_key_made_in_admin_is_shown_once_and_stored_hashed(admin_client: Client) -> None:
    owner = User.objects.create_user("helpdesk")
    response = admin_client.post(
        "/admin/apikeys/apikey/add/",
        {
            "name": "helpdesk bot",
            "user": owner.pk,
            "priority": "background",
            "rate_limit": 10,
            "rate_window_s": 60,
            "max_concurrent": 2,
        },
        follow=True,
    )
    assert response.status_code == 200
    page = response.content.decode()
    shown = re.findall(r"ick_[0-9a-f]{8}_[A-Za-z0-9_-]{43}", page)
    assert len(shown) == 1
    secret = shown[0]
    key = ApiKey.objects.get()
    assert (key.name, key.user, key.priority, key.max_concurrent) == (
        "helpdesk bot",
        owner,
        "background",
        2,
    )
    assert key.key_hash == key_hash(secret)
    assert secret not in str(ApiKey.objects.values().get())  # only the hash is stored
    assert api_key_authenticate(raw_key=secret) == key

    # never again: not on the list, not on the key's page
    for url in ("/admin/apikeys/apikey/", f"/admin/apikeys/apikey/{key.pk}/change/"):
        later = admin_client.get(url).content.decode()
        assert secret not in later
        assert f"ick_{key.prefix}_" in later

    revoked = admin_client.post(
        "/admin/apikeys/apikey/",
        {"action": "revoke", "_selected_action": [key.pk]},
        follow=True,
    )
    assert "Revoked 1 key(s)." in revoked.content.decode()
    assert api_key_authenticate(raw_key=secret) is None


def test_keys_cannot_be_deleted_only_revoked(admin_client: Client) -> None:
    from chatapp.apikeys import services

    issued = services.api_key_create(user=User.objects.create_user("u"), name="k")
    response = admin_client.get(f"/admin/apikeys/apikey/{issued.key.pk}/delete/")
    assert response.status_code == 403
    assert ApiKey.objects.filter(pk=issued.key.pk).exists()
