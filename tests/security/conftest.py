"""Fixtures of the security suite: the socket users (alice, bob) and admin-site users."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

from tests.support.users import alice, bob

__all__ = ["alice", "bob", "editor", "plain_staff"]

EDITOR_PERMISSIONS = (
    ("prompts", "add_prompttemplate"),
    ("prompts", "change_prompttemplate"),
    ("prompts", "view_prompttemplate"),
    ("faq", "add_faqentry"),
    ("faq", "change_faqentry"),
    ("faq", "view_faqentry"),
)


@pytest.fixture
def plain_staff(db: None) -> User:
    """Staff (may open the admin) but granted no model permission."""
    return User.objects.create_user("staff-no-perms", password="pw-staff-123", is_staff=True)


@pytest.fixture
def editor(db: None) -> User:
    """Staff with exactly the template and FAQ permissions an admin editor is given."""
    user = User.objects.create_user("editor", password="pw-editor-123", is_staff=True)
    for app_label, codename in EDITOR_PERMISSIONS:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user
