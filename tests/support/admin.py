"""The Django admin's FAQ form: its add page and the form data a staff user posts."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

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
