"""Staff read what visitors asked on the websites, in admin; staff's own chats are not there."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from chatapp.conversations.models import Conversation, Message
from chatapp.websites import services
from chatapp.websites.models import Guest
from tests.chatapp.websites.sites import HOST, site_made
from tests.support.admin import superuser_client

pytestmark = pytest.mark.django_db

LIST = reverse("admin:websites_guestconversation_changelist")


def guest_conversation(site_name: str, question: str, *, status: str, source: str) -> None:
    site = site_made(name=site_name)
    guest = services.guest_enter(site=site, origin=HOST, token=None).guest
    conversation = Conversation.objects.create(owner=guest.user, title=question)
    Message.objects.create(conversation=conversation, role="user", content=question)
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="An answer.",
        status=status,
        source=source,
        feedback="down",
    )


def test_staff_see_each_guest_conversations_site_first_question_outcome_and_thumbs() -> None:
    guest_conversation("Shop", "Do you ship to Norway?", status="complete", source="faq")
    guest_conversation("Bank", "How do I close my account?", status="stopped", source="model")
    staff = User.objects.create_user("dana", password="pw-dana-123")
    Conversation.objects.create(owner=staff, title="Staff's own private chat")

    page = superuser_client().get(LIST).content.decode()

    assert "Do you ship to Norway?" in page
    assert "complete (FAQ)" in page
    assert "How do I close my account?" in page
    assert "stopped" in page
    assert "0 / 1" in page
    assert "Staff&#x27;s own private chat" not in page
    assert "Staff's own private chat" not in page


def test_guest_conversations_filter_by_site() -> None:
    guest_conversation("Shop", "Do you ship to Norway?", status="complete", source="model")
    guest_conversation("Bank", "How do I close my account?", status="complete", source="model")
    bank = Conversation.objects.get(title="How do I close my account?").owner.guest.site

    page = superuser_client().get(LIST, {"owner__guest__site__id__exact": bank.pk})

    assert page.status_code == 200
    text = page.content.decode()
    assert "How do I close my account?" in text
    assert "Do you ship to Norway?" not in text


def test_deleting_a_guest_in_admin_deletes_its_conversations_too() -> None:
    guest_conversation("Shop", "Do you ship to Norway?", status="complete", source="model")
    guest = Guest.objects.get()
    client = superuser_client()

    response = client.post(
        reverse("admin:websites_guest_changelist"),
        {"action": "delete_selected", "_selected_action": [str(guest.pk)], "post": "yes"},
    )

    assert response.status_code == 302
    assert not Guest.objects.exists()
    assert not User.objects.filter(pk=guest.user_id).exists()
    assert not Conversation.objects.exists()
