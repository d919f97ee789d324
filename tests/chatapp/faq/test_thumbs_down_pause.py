"""An FAQ entry whose answers keep getting thumbs-down stops answering until an admin looks.

Real services and database (the test settings' SQLite); the entry's answers are stored as the
relay stores them (`source="faq"`, `faq_entry`), and the thumbs-down go through the same
service as the page's feedback frame.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from django.utils import timezone

from chatapp.conversations.models import Conversation, Message
from chatapp.conversations.services import message_feedback
from chatapp.faq.models import FaqEntry
from tests.support.faq_standin import entry_create
from tests.support.users import client_for

pytestmark = pytest.mark.django_db(transaction=True)


def faq_answers(entry: FaqEntry, user: User, count: int) -> list[Message]:
    conversation = Conversation.objects.create(owner=user)
    return [
        Message.objects.create(
            conversation=conversation,
            role=Message.Role.ASSISTANT,
            content=entry.answer,
            source="faq",
            faq_entry=entry,
        )
        for _ in range(count)
    ]


@override_settings(CHAT_FAQ_THUMBS_DOWN_LIMIT=3, CHAT_FAQ_THUMBS_DOWN_WINDOW_S=86400)
def test_the_third_thumbs_down_in_a_day_pauses_the_entry_with_its_reason() -> None:
    user = User.objects.create_user("ann", password="pw-123456789")
    entry = entry_create()
    answers = faq_answers(entry, user, 3)
    for answer in answers[:2]:
        message_feedback(sender=user, message_id=answer.id, rating="down")
    entry.refresh_from_db()
    assert (entry.enabled, entry.thumbs_down, entry.paused_reason) == (True, 2, "")

    message_feedback(sender=user, message_id=answers[2].id, rating="down")
    entry.refresh_from_db()
    assert entry.enabled is False
    assert entry.thumbs_down == 3
    assert "3 thumbs-down within 1 day(s)" in entry.paused_reason


@override_settings(CHAT_FAQ_THUMBS_DOWN_LIMIT=3, CHAT_FAQ_THUMBS_DOWN_WINDOW_S=86400)
def test_thumbs_down_older_than_the_window_do_not_count() -> None:
    user = User.objects.create_user("ann", password="pw-123456789")
    entry = entry_create()
    old, *fresh = faq_answers(entry, user, 3)
    message_feedback(sender=user, message_id=old.id, rating="down")
    Message.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=2))
    for answer in fresh:
        message_feedback(sender=user, message_id=answer.id, rating="down")
    entry.refresh_from_db()
    assert entry.enabled is True  # 2 within the day
    assert entry.thumbs_down == 3  # all are counted on the entry


@override_settings(CHAT_FAQ_THUMBS_DOWN_LIMIT=1)
def test_an_admin_enabling_a_paused_entry_clears_its_reason() -> None:
    user = User.objects.create_user("ann", password="pw-123456789")
    entry = entry_create()
    (answer,) = faq_answers(entry, user, 1)
    message_feedback(sender=user, message_id=answer.id, rating="down")
    entry.refresh_from_db()
    assert entry.enabled is False
    assert entry.paused_reason

    admin = User.objects.create_superuser("root", password="pw-123456789")
    client = client_for(admin)
    page = client.get("/admin/faq/faqentry/")
    assert "thumbs-down within" in page.content.decode()  # shown next to the entry
    response = client.post(
        f"/admin/faq/faqentry/{entry.pk}/change/",
        {
            "question": entry.question,
            "alternates": entry.alternates,
            "answer": entry.answer,
            "template": "",
            "enabled": "on",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    entry.refresh_from_db()
    assert (entry.enabled, entry.paused_reason) == (True, "")


@override_settings(CHAT_FAQ_THUMBS_DOWN_LIMIT=0)
def test_a_limit_of_zero_never_pauses() -> None:
    user = User.objects.create_user("ann", password="pw-123456789")
    entry = entry_create()
    for answer in faq_answers(entry, user, 5):
        message_feedback(sender=user, message_id=answer.id, rating="down")
    entry.refresh_from_db()
    assert entry.enabled is True
