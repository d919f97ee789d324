"""Point 3: only staff with the model permissions edit prompt templates and FAQ entries.

Through the real Django admin (`/admin/`): anonymous users and logged-in non-staff users are
sent to the admin login, staff without the model permissions get 403 and nothing is written,
staff granted the permissions (the `editor` fixture) can add both.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from chatapp.apikeys.models import ApiKey
from chatapp.faq.models import FaqEntry
from chatapp.prompts.models import PromptTemplate
from tests.support.admin import FAQ_ADD, faq_form
from tests.support.users import client_for

pytestmark = pytest.mark.django_db

TEMPLATE_ADD = reverse("admin:prompts_prompttemplate_add")
FAQ_EXPORT = reverse("admin:faq_faqentry_export")
API_KEY_ADD = reverse("admin:apikeys_apikey_add")


def template_form(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": "",
        "enabled": "on",
        "system_prompt": "You are a helpful support assistant.",
        "body": "My order {{order}} is late.",
        "variables": '[{"name": "order", "type": "string"}]',
        "sampling": "{}",
        "versions-TOTAL_FORMS": "0",
        "versions-INITIAL_FORMS": "0",
        "versions-MIN_NUM_FORMS": "0",
        "versions-MAX_NUM_FORMS": "1000",
        "_save": "Save",
    }


@pytest.fixture
def existing() -> dict[str, str]:
    """The change pages of one template and one FAQ entry (with their private text)."""
    template = PromptTemplate.objects.create(
        name="internal-refunds", system_prompt="Refund policy v7 (internal).", body="Help."
    )
    entry = FaqEntry.objects.create(question="internal question?", answer="internal answer")
    return {
        "template": reverse("admin:prompts_prompttemplate_change", args=[template.pk]),
        "faq": reverse("admin:faq_faqentry_change", args=[entry.pk]),
    }


def pages(existing: dict[str, str]) -> list[str]:
    return [TEMPLATE_ADD, FAQ_ADD, existing["template"], existing["faq"], FAQ_EXPORT]


def nothing_added() -> bool:
    return not PromptTemplate.objects.filter(name="intruder").exists() and not (
        FaqEntry.objects.filter(question="intruder?").exists()
    )


def post_both(user: User | None) -> list[int]:
    client = client_for(user)
    return [
        client.post(TEMPLATE_ADD, template_form("intruder")).status_code,
        client.post(FAQ_ADD, faq_form("intruder?")).status_code,
    ]


@pytest.mark.parametrize("logged_in", [False, True], ids=["anonymous", "logged-in-user"])
def test_non_staff_are_sent_to_the_admin_login(
    existing: dict[str, str], django_user_model: type[User], logged_in: bool
) -> None:
    user = django_user_model.objects.create_user("carol", password="pw") if logged_in else None
    client = client_for(user)
    for url in pages(existing):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/admin/login/"), url
    assert all(status == 302 for status in post_both(user))
    assert nothing_added()


def test_staff_without_the_model_permissions_get_403(
    existing: dict[str, str], plain_staff: User
) -> None:
    client = client_for(plain_staff)
    for url in pages(existing):
        response = client.get(url)
        assert response.status_code == 403, url
        assert b"internal" not in response.content, url
    assert post_both(plain_staff) == [403, 403]
    assert nothing_added()
    assert client.get(API_KEY_ADD).status_code == 403


def test_staff_with_the_permissions_add_a_template_and_a_faq_entry(editor: User) -> None:
    client = client_for(editor)
    assert client.get(TEMPLATE_ADD).status_code == 200
    assert client.get(FAQ_ADD).status_code == 200

    template = client.post(TEMPLATE_ADD, template_form("returns"))
    faq = client.post(FAQ_ADD, faq_form("How do I reset my password?"))

    assert template.status_code == 302, template.content[:2000]
    assert faq.status_code == 302, faq.content[:2000]
    assert PromptTemplate.objects.filter(name="returns").exists()
    assert FaqEntry.objects.filter(question="How do I reset my password?").exists()
    assert client.get(FAQ_EXPORT).status_code == 200
    # Template and FAQ editors are not key admins: API keys need their own permission.
    assert client.get(API_KEY_ADD).status_code == 403
    assert not ApiKey.objects.exists()
