"""Point 4: forms refuse a POST without the CSRF token and accept one with it.

`Client(enforce_csrf_checks=True)` runs Django's CsrfViewMiddleware as a browser meets it (the
test client skips it otherwise). The token is taken the way a browser gets it: from the form
page (cookie and hidden field). The socket has no token and is guarded by its Origin check
instead (test_origins.py); the OpenAI-compatible API is CSRF-exempt because it takes API keys
only, never the session cookie (test_isolation_http.py).
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from chatapp.faq.models import FaqEntry
from tests.support.admin import FAQ_ADD, faq_form
from tests.support.users import client_for

pytestmark = pytest.mark.django_db

LOGIN = reverse("login")
PASSWORD = "pw-dave-correct-horse"


def form_token(client: Client, url: str) -> str:
    page = client.get(url)
    assert page.status_code == 200
    found = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content)
    assert found is not None, "the form carries no CSRF token"
    return found.group(1).decode()


@pytest.fixture
def dave(django_user_model: type[User]) -> User:
    return django_user_model.objects.create_user("dave", password=PASSWORD)


def test_login_without_a_csrf_token_is_refused(dave: User) -> None:
    client = client_for(None, enforce_csrf_checks=True)
    form_token(client, LOGIN)  # even with the cookie set, the form field is required

    response = client.post(LOGIN, {"username": "dave", "password": PASSWORD})

    assert response.status_code == 403
    assert "sessionid" not in response.cookies


def test_login_with_the_forms_csrf_token_logs_in(dave: User) -> None:
    client = client_for(None, enforce_csrf_checks=True)
    token = form_token(client, LOGIN)

    response = client.post(
        LOGIN, {"username": "dave", "password": PASSWORD, "csrfmiddlewaretoken": token}
    )

    assert response.status_code == 302
    assert response["Location"] == "/"
    assert response.cookies["sessionid"].value


def test_login_with_a_token_from_another_session_is_refused(dave: User) -> None:
    """A token an attacker fetched for themselves does not match the victim's cookie."""
    attacker = client_for(None, enforce_csrf_checks=True)
    victim = client_for(None, enforce_csrf_checks=True)
    stolen = form_token(attacker, LOGIN)
    form_token(victim, LOGIN)

    response = victim.post(
        LOGIN, {"username": "dave", "password": PASSWORD, "csrfmiddlewaretoken": stolen}
    )

    assert response.status_code == 403


def test_admin_add_form_without_a_csrf_token_is_refused(editor: User) -> None:
    client = client_for(editor, enforce_csrf_checks=True)
    form_token(client, FAQ_ADD)

    response = client.post(FAQ_ADD, faq_form("Where is my parcel?"))

    assert response.status_code == 403
    assert not FaqEntry.objects.exists()


def test_admin_add_form_with_the_csrf_token_saves(editor: User) -> None:
    client = client_for(editor, enforce_csrf_checks=True)
    token = form_token(client, FAQ_ADD)

    response = client.post(
        FAQ_ADD, {**faq_form("Where is my parcel?"), "csrfmiddlewaretoken": token}
    )

    assert response.status_code == 302
    assert FaqEntry.objects.filter(question="Where is my parcel?").exists()


def test_logout_needs_a_post_with_the_token(dave: User) -> None:
    """A link or image on another site (a GET, or a POST without the token) cannot log the
    user out; the real form can."""
    client = client_for(dave, enforce_csrf_checks=True)

    assert client.get(reverse("logout")).status_code == 405
    assert client.post(reverse("logout")).status_code == 403
    assert client.get("/api/conversations/").status_code == 200  # still logged in

    token = form_token(client, LOGIN)
    assert client.post(reverse("logout"), {"csrfmiddlewaretoken": token}).status_code == 302
    assert client.get("/api/conversations/").status_code == 401
