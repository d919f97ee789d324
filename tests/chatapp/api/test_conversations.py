"""The conversation list: the user's own conversations, newest first; nobody else's."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User
from django.test import Client

from chatapp.conversations import services

pytestmark = pytest.mark.django_db


def ask(user: User, text: str) -> services.TurnStart:
    return services.turn_start(
        sender=user,
        conversation_id=None,
        client_message_id=uuid.uuid4(),
        text=text,
        run_id=uuid.uuid4(),
    )


def test_lists_only_my_conversations_newest_first_with_titles() -> None:
    alice = User.objects.create_user("alice", password="pw-alice-123")
    bob = User.objects.create_user("bob", password="pw-bob-123")
    older = ask(alice, "Where is my parcel?")
    newer = ask(alice, "How   do I\\nreturn " + "a very long item name " * 5)
    ask(bob, "bob's secret question")
    client = Client()
    client.force_login(alice)

    response = client.get("/api/conversations/")

    assert response.status_code == 200
    items = response.json()["conversations"]
    assert [i["id"] for i in items] == [str(newer.conversation.id), str(older.conversation.id)]
    assert items[1]["title"] == "Where is my parcel?"
    assert len(items[0]["title"]) == 60
    assert items[0]["title"].endswith("…")
    assert "bob" not in response.content.decode()
    assert "no-store" in response["Cache-Control"]


def test_the_chat_page_carries_the_list_for_the_sidebar() -> None:
    alice = User.objects.create_user("alice", password="pw-alice-123")
    turn = ask(alice, "Where is my parcel?")
    client = Client()
    client.force_login(alice)
    page = client.get(f"/c/{turn.conversation.id}/")
    assert page.status_code == 200
    assert page.context["conversations"][0]["title"] == "Where is my parcel?"


def test_anonymous_users_get_401_json() -> None:
    response = Client().get("/api/conversations/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
