"""The Django admin: a logged-in superuser, the FAQ add page and the form data it posts."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from tests.support.users import client_for

FAQ_ADD = reverse("admin:faq_faqentry_add")


def faq_form(question: str) -> dict[str, Any]:
    return {
        "question": question,
        "alternates": "",
        "answer": "Use the reset link on the login page.",
        "template": "",
        "enabled": "on",
        "_save": "Save",
    }


def superuser_client(username: str = "root") -> Client:
    return client_for(User.objects.create_superuser(username, password="pw-root-123"))
