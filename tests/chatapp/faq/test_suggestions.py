"""Suggested phrasings: questions that came close to an entry (or that an admin marked as it)
are listed per entry in the admin, and one click adds one as an alternate.

Real services, admin pages and database; answers are stored through `answer_finish`, the one
place the relay and the orphan reaper store an answer, with the stats a worker sends.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from chatapp.conversations.models import Message
from chatapp.faq.models import FaqEntry, FaqSuggestion
from inference.wire.protocol import AnswerStats
from tests.support.admin import superuser_client
from tests.support.conversations import model_answered
from tests.support.faq_standin import entry_create
from tests.support.users import client_for

pytestmark = pytest.mark.django_db(transaction=True)

CHANGELIST = reverse("admin:faq_faqsuggestion_changelist")


def model_answer(question: str, *, near: int | None, user: User | None = None) -> Message:
    """A user question and the model's answer, stored as the relay stores it."""
    owner = user or User.objects.get_or_create(username="ann")[0]
    return model_answered(owner, question, AnswerStats(source="model", faq_near_entry_id=near))


def listed(admin: Client, url: str) -> list[str]:
    """The questions the suggestions list shows."""
    return [s.question for s in admin.get(url).context["cl"].result_list]


def test_asking_again_counts_on_one_row_and_a_dismissed_one_stays_dismissed() -> None:
    entry = entry_create()
    model_answer("Where do I set a new password?", near=entry.pk)
    model_answer("where do I set  a new PASSWORD?", near=entry.pk)  # case and spacing aside
    suggestion = FaqSuggestion.objects.get()
    assert (suggestion.entry_id, suggestion.times_asked) == (entry.pk, 2)

    admin = superuser_client()
    assert listed(admin, CHANGELIST) == ["Where do I set a new password?"]
    admin.post(reverse("admin:faq_faqsuggestion_dismiss", args=[suggestion.pk]))
    assert listed(admin, CHANGELIST) == []
    model_answer("Where do I set a new password?", near=entry.pk)
    suggestion.refresh_from_db()
    assert (suggestion.dismissed, suggestion.times_asked) == (True, 3)
    assert listed(admin, CHANGELIST + "?status=dismissed") == ["Where do I set a new password?"]


def test_one_click_adds_the_question_as_an_alternate_and_re_embeds_the_entry() -> None:
    entry = entry_create(alternates="I forgot my password")
    model_answer("Where do I set a new password?", near=entry.pk)
    suggestion = FaqSuggestion.objects.get()

    admin = superuser_client()
    entries = admin.get(reverse("admin:faq_faqentry_changelist")).content.decode()
    assert "1 to review" in entries  # shown next to the entry, linked to its suggestions
    assert (
        admin.get(reverse("admin:faq_faqsuggestion_accept", args=[suggestion.pk])).status_code
        == 405
    )
    response = admin.post(reverse("admin:faq_faqsuggestion_accept", args=[suggestion.pk]))
    assert response.status_code == 302

    entry.refresh_from_db()
    assert entry.phrasings == [
        "How do I reset my password?",
        "I forgot my password",
        "Where do I set a new password?",
    ]
    # Celery (eager in tests) embedded the new phrasing, so workers are sent the entry again
    assert entry.embedded_phrasings == entry.phrasings
    assert not FaqSuggestion.objects.exists()
    # it is a phrasing now: asked again, it is not suggested a second time
    model_answer("Where do I set a new password?", near=entry.pk)
    assert not FaqSuggestion.objects.exists()


def test_an_admin_marks_a_model_answer_as_an_faq_from_the_messages_list() -> None:
    entry = entry_create()
    answer = model_answer("My login does not work anymore, what do I do", near=None)
    assert not FaqSuggestion.objects.exists()

    admin = superuser_client()
    response = admin.post(
        reverse("admin:conversations_message_changelist"),
        {"action": "suggest_for_faq", "_selected_action": [str(answer.id)], "faq_entry": entry.pk},
        follow=True,
    )
    assert "Listed 1 question(s) for review" in response.content.decode()
    suggestion = FaqSuggestion.objects.get()
    assert (suggestion.entry_id, suggestion.source, suggestion.question) == (
        entry.pk,
        FaqSuggestion.Source.MARKED,
        "My login does not work anymore, what do I do",
    )

    nothing_chosen = admin.post(
        reverse("admin:conversations_message_changelist"),
        {"action": "suggest_for_faq", "_selected_action": [str(answer.id)], "faq_entry": ""},
        follow=True,
    )
    assert "Choose the FAQ entry first." in nothing_chosen.content.decode()


def test_what_is_never_suggested() -> None:
    entry = entry_create()
    model_answer("How do I reset my password?", near=entry.pk)  # already its question
    model_answer("x" * 301, near=entry.pk)  # a paragraph is not an FAQ phrasing
    model_answer("Where do I set a new password?", near=None)  # not close to any entry
    assert not FaqSuggestion.objects.exists()


def test_deleting_the_conversation_deletes_its_suggestion() -> None:
    entry = entry_create()
    answer = model_answer("Where do I set a new password?", near=entry.pk)
    assert FaqSuggestion.objects.exists()
    answer.conversation.delete()
    assert not FaqSuggestion.objects.exists()


def test_an_answer_whose_entry_was_deleted_meanwhile_is_still_stored() -> None:
    entry = entry_create()
    gone = entry.pk
    FaqEntry.objects.filter(pk=gone).delete()
    answer = model_answer("Where do I set a new password?", near=gone)
    assert (answer.status, answer.content, answer.faq_near_entry_id) == (
        Message.Status.COMPLETE,
        "A model answer.",
        None,
    )


def test_staff_who_may_not_edit_entries_cannot_add_phrasings() -> None:
    entry = entry_create()
    model_answer("Where do I set a new password?", near=entry.pk)
    suggestion = FaqSuggestion.objects.get()
    viewer = User.objects.create_user("viewer", password="pw-viewer-123", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_faqsuggestion"))
    client = client_for(viewer)
    response = client.post(reverse("admin:faq_faqsuggestion_accept", args=[suggestion.pk]))
    assert response.status_code == 403
    entry.refresh_from_db()
    assert entry.alternates == ""
