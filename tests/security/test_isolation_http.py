"""Point 1 (HTTP): the pages and JSON API show a user only their own conversations, and
nothing at all without a login.

Bob's conversation is stored by the same service the socket uses. Each check is run for Bob
too, so it is known to show the data it must hide from Alice.
"""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User

from chatapp.conversations.models import Conversation
from tests.support.conversations import first_turn
from tests.support.users import client_for

pytestmark = pytest.mark.django_db

BOB_SECRET = "bob-medical-claim-4471"
ALICE_TOPIC = "alice-printer-jam"


@pytest.fixture
def alice(db: None) -> User:  # sync twins of the socket tests' users: one DB transaction
    return User.objects.create_user("alice", password="pw-alice-123")


@pytest.fixture
def bob(db: None) -> User:
    return User.objects.create_user("bob", password="pw-bob-123")


def conversation_of(user: User, text: str) -> Conversation:
    return first_turn(user, text).conversation


def test_conversation_list_api_lists_only_the_callers_conversations(alice: User, bob: User) -> None:
    alices = conversation_of(alice, ALICE_TOPIC)
    bobs = conversation_of(bob, BOB_SECRET)

    response = client_for(alice).get("/api/conversations/")

    assert response.status_code == 200
    assert [c["id"] for c in response.json()["conversations"]] == [str(alices.id)]
    assert BOB_SECRET not in response.content.decode()
    assert "no-store" in response["Cache-Control"]  # never kept by a shared cache
    bobs_view = client_for(bob).get("/api/conversations/").json()["conversations"]
    assert [c["id"] for c in bobs_view] == [str(bobs.id)]


def test_chat_page_of_bobs_conversation_is_404_for_alice_like_a_missing_one(
    alice: User, bob: User
) -> None:
    bobs = conversation_of(bob, BOB_SECRET)

    foreign = client_for(alice).get(f"/c/{bobs.id}/")
    missing = client_for(alice).get(f"/c/{uuid.uuid4()}/")

    assert foreign.status_code == 404
    assert BOB_SECRET not in foreign.content.decode()
    # Same answer as for an id that does not exist: the page is no oracle for Bob's ids.
    assert (foreign.status_code, foreign.content) == (missing.status_code, missing.content)
    own = client_for(bob).get(f"/c/{bobs.id}/")
    assert own.status_code == 200
    assert BOB_SECRET in own.content.decode()


def test_alices_chat_page_lists_none_of_bobs_conversations(alice: User, bob: User) -> None:
    conversation_of(alice, ALICE_TOPIC)
    conversation_of(bob, BOB_SECRET)

    page = client_for(alice).get("/").content.decode()

    assert ALICE_TOPIC in page
    assert BOB_SECRET not in page


@pytest.mark.parametrize("path", ["/", "/c/{conversation}/"])
def test_anonymous_pages_redirect_to_the_login(bob: User, path: str) -> None:
    bobs = conversation_of(bob, BOB_SECRET)
    url = path.format(conversation=bobs.id)

    response = client_for(None).get(url)

    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={url}"
    assert BOB_SECRET not in response.content.decode()


@pytest.mark.parametrize("path", ["/api/conversations/", "/api/templates/"])
def test_anonymous_api_calls_get_401_json(bob: User, path: str) -> None:
    conversation_of(bob, BOB_SECRET)

    response = client_for(None).get(path)

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
    assert BOB_SECRET not in response.content.decode()


@pytest.mark.parametrize("path", ["/v1/models", "/v1/chat/completions"])
def test_the_openai_api_ignores_a_browser_session(alice: User, path: str) -> None:
    """The API is for API keys only: a logged-in browser (the session cookie a cross-site
    page would ride on) gets 401, so its CSRF exemption exposes nothing."""
    client = client_for(alice)
    if path.endswith("completions"):
        response = client.post(
            path,
            {"model": "any", "messages": [{"role": "user", "content": "hi"}]},
            content_type="application/json",
        )
    else:
        response = client.get(path)

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "missing_api_key"
