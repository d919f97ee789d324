"""The preload endpoint: published templates only, no system prompts, ETag and 304."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from chatapp.prompts import services
from tests.chatapp.prompts.factories import SYSTEM, template_create
from tests.support.users import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_in() -> Client:
    return client_for(User.objects.create_user("alice", password="pw-alice-123"))


def test_lists_published_versions_without_the_system_prompt(client_in: Client) -> None:
    version = services.template_publish(template=template_create(), user=None)
    template_create(name="Draft only")  # never published: not offered
    response = client_in.get("/api/templates/")
    assert response.status_code == 200
    data = response.json()
    assert [t["name"] for t in data["templates"]] == ["Late order"]
    entry = data["templates"][0]
    assert (entry["version"], entry["sha256"]) == (1, version.sha256)
    assert entry["variables"][0]["name"] == "order_id"
    assert SYSTEM not in response.content.decode()


def test_revalidation_answers_304_until_something_is_published(client_in: Client) -> None:
    template = template_create()
    services.template_publish(template=template, user=None)
    first = client_in.get("/api/templates/")
    etag = first["ETag"]
    again = client_in.get("/api/templates/", HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304
    assert again["ETag"] == etag

    template.body = "Where is order {{order_id}}? I want a {{remedy}}."
    template.save()
    assert client_in.get("/api/templates/", HTTP_IF_NONE_MATCH=etag).status_code == 304
    services.template_publish(template=template, user=None)
    changed = client_in.get("/api/templates/", HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200
    assert changed["ETag"] != etag
    assert changed.json()["templates"][0]["version"] == 2


def test_anonymous_users_get_a_json_401() -> None:
    response = Client().get("/api/templates/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
