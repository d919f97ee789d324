"""The chat page: login required, accessible controls, history only for the owner."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from chatapp.conversations.models import Conversation, Message
from tests.support.users import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice_client() -> Client:
    return client_for(User.objects.create_user("alice", password="pw-alice-123"))


def test_the_chat_page_needs_a_login() -> None:
    response = Client().get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_the_login_form_logs_in() -> None:
    User.objects.create_user("carol", password="pw-carol-123")
    client = Client(enforce_csrf_checks=True)
    client.get("/accounts/login/")
    token = client.cookies["csrftoken"].value
    response = client.post(
        "/accounts/login/",
        {"username": "carol", "password": "pw-carol-123", "csrfmiddlewaretoken": token},
    )
    assert response.status_code == 302
    assert client.get("/").status_code == 200


def test_the_page_has_the_labelled_controls_and_a_log(alice_client: Client) -> None:
    html = alice_client.get("/").content.decode()
    assert re.search(r'<label for="chat-input">Message</label>', html)
    assert re.search(r'<textarea id="chat-input"', html)
    assert re.search(r"<button[^>]*>Send</button>", html)
    assert re.search(r"<button[^>]*>Stop</button>", html)
    assert 'role="log"' in html
    assert "chat.js" in html


def test_history_is_rendered_as_data_not_html(alice_client: Client) -> None:
    alice = User.objects.get(username="alice")
    conversation = Conversation.objects.create(owner=alice, title="t")
    Message.objects.create(
        conversation=conversation, role="user", content="<script>alert(1)</script>"
    )
    html = alice_client.get(f"/c/{conversation.id}/").content.decode()
    assert "<script>alert(1)</script>" not in html
    data = re.search(
        r'<script id="chat-history" type="application/json">(.*?)</script>', html, re.S
    )
    assert data is not None
    assert json.loads(data.group(1))[0]["content"] == "<script>alert(1)</script>"


def test_someone_elses_conversation_is_a_404(alice_client: Client) -> None:
    bob = User.objects.create_user("bob", password="pw-bob-123")
    conversation = Conversation.objects.create(owner=bob, title="private")
    assert alice_client.get(f"/c/{conversation.id}/").status_code == 404


def test_healthz_answers_without_login() -> None:
    response = Client().get("/healthz")
    assert response.status_code == 200
    # the embedded default's own Redis is checked like a deployment's
    assert response.json() == {"status": "ok", "database": "ok", "redis": "ok"}


@pytest.mark.redis
def test_healthz_checks_redis_when_it_is_configured(settings: Any) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:6379/15"
    assert Client().get("/healthz").json() == {"status": "ok", "database": "ok", "redis": "ok"}


def test_healthz_is_503_and_names_the_dependency_that_is_down(
    settings: Any,
) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"status": "down", "database": "ok", "redis": "down"}
