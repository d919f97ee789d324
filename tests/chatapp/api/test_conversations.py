"""The conversation list: the user's own conversations, newest first; nobody else's."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.support.conversations import first_turn
from tests.support.users import client_for

pytestmark = pytest.mark.django_db


def test_lists_only_my_conversations_newest_first_with_titles() -> None:
    alice = User.objects.create_user("alice", password="pw-alice-123")
    bob = User.objects.create_user("bob", password="pw-bob-123")
    older = first_turn(alice, "Where is my parcel?")
    newer = first_turn(alice, "How   do I\\nreturn " + "a very long item name " * 5)
    first_turn(bob, "bob's secret question")
    client = client_for(alice)

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
    turn = first_turn(alice, "Where is my parcel?")
    client = client_for(alice)
    page = client.get(f"/c/{turn.conversation.id}/")
    assert page.status_code == 200
    assert page.context["conversations"][0]["title"] == "Where is my parcel?"


def test_anonymous_users_get_401_json() -> None:
    response = Client().get("/api/conversations/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
