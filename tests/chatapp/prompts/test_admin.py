"""The admin: draft editing shows preview and lint; publishing is an explicit action."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from chatapp.prompts.models import PromptTemplateVersion
from tests.chatapp.prompts.factories import template_create
from tests.support.admin import superuser_client
from tests.support.users import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client() -> Client:
    return superuser_client()


def test_the_change_page_shows_a_preview_and_the_prefix_cache_lint(admin_client: Client) -> None:
    template = template_create(system_prompt="Today is 2026-11-29. Help {{customer}}.")
    html = admin_client.get(f"/admin/prompts/prompttemplate/{template.pk}/change/").content.decode()
    assert "prefix-cache lint" in html.lower()
    assert "2026-11-29" in html
    assert "{{customer}}" in html
    assert "First user message (sample values)" in html
    assert "not published yet" in html


def test_publish_action_creates_a_version_and_reports_it(admin_client: Client) -> None:
    template = template_create()
    response = admin_client.post(
        "/admin/prompts/prompttemplate/",
        {"action": "publish", "_selected_action": [template.pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert "published v1" in response.content.decode()
    assert PromptTemplateVersion.objects.filter(template=template, version=1).exists()

    again = admin_client.post(
        "/admin/prompts/prompttemplate/",
        {"action": "publish", "_selected_action": [template.pk]},
        follow=True,
    )
    assert "Nothing changed since version 1" in again.content.decode()


def test_only_staff_can_reach_the_template_admin() -> None:
    client = client_for(User.objects.create_user("eve", password="pw-eve-123"))
    response = client.get("/admin/prompts/prompttemplate/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
