"""Guests enter a site's widget, come back with their token, and are deleted after retention."""

from __future__ import annotations

import datetime
import logging

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from chatapp.conversations.models import Conversation
from chatapp.websites import services
from chatapp.websites.models import Guest
from chatapp.websites.tokens import TokenRefused
from tests.chatapp.websites.sites import HOST, site_made

pytestmark = pytest.mark.django_db


def test_a_visitor_without_a_token_becomes_a_new_guest_that_cannot_log_in() -> None:
    site = site_made()
    entry = services.guest_enter(site=site, origin=HOST, token=None)
    assert entry.guest.site == site
    assert entry.guest.origin == HOST
    assert not entry.guest.user.has_usable_password()
    assert not entry.guest.user.is_staff


def test_a_visitor_coming_back_with_its_token_is_the_same_guest() -> None:
    site = site_made()
    first = services.guest_enter(site=site, origin=HOST, token=None)
    again = services.guest_enter(site=site, origin=HOST, token=first.token)
    assert again.guest.id == first.guest.id
    assert Guest.objects.count() == 1


@pytest.mark.parametrize("tamper", ["flip", "garbage"])
def test_a_forged_token_is_refused(tamper: str) -> None:
    site = site_made()
    token = services.guest_enter(site=site, origin=HOST, token=None).token
    forged = token[:-2] + ("AA" if token[-2:] != "AA" else "BB") if tamper == "flip" else "x.y.z"
    with pytest.raises(TokenRefused) as refused:
        services.guest_enter(site=site, origin=HOST, token=forged)
    assert refused.value.problem == "forged"
    assert Guest.objects.count() == 1


def test_a_token_of_another_site_opens_nothing_there() -> None:
    site_a, site_b = site_made(), site_made()
    token_a = services.guest_enter(site=site_a, origin=HOST, token=None).token
    with pytest.raises(TokenRefused) as refused:
        services.guest_enter(site=site_b, origin=HOST, token=token_a)
    assert refused.value.problem == "other_site"
    with pytest.raises(TokenRefused):
        services.guest_of_token(site_key=site_b.key, token=token_a)


def test_a_token_older_than_the_retention_is_expired(monkeypatch: pytest.MonkeyPatch) -> None:
    site = site_made(retention_days=1)
    token = services.guest_enter(site=site, origin=HOST, token=None).token
    later = timezone.now().timestamp() + 86_400 + 60
    monkeypatch.setattr("django.core.signing.time.time", lambda: later)
    with pytest.raises(TokenRefused) as refused:
        services.guest_of_token(site_key=site.key, token=token)
    assert refused.value.problem == "expired"


def test_a_disabled_site_or_a_removed_origin_lets_no_guest_in() -> None:
    site = site_made(allowed_origins=f"{HOST}\nhttps://shop.example")
    token = services.guest_enter(site=site, origin=HOST, token=None).token
    site.allowed_origins = "https://shop.example"
    site.save()
    with pytest.raises(services.WidgetRefused):
        services.guest_of_token(site_key=site.key, token=token)
    with pytest.raises(services.WidgetRefused):
        services.guest_enter(site=site, origin="https://other.example", token=None)
    site.enabled = False
    site.save()
    with pytest.raises(services.WidgetRefused):
        services.guest_enter(site=site, origin="https://shop.example", token=None)
    assert Guest.objects.count() == 1


def test_a_refusal_is_logged_once_per_site_and_origin(caplog: pytest.LogCaptureFixture) -> None:
    site = site_made()
    with caplog.at_level(logging.WARNING, logger="chatapp.websites.services"):
        for _ in range(5):
            with pytest.raises(services.WidgetRefused):
                services.site_allowing(site.key, "https://evil.example")
    lines = [r for r in caplog.records if "evil.example" in r.getMessage()]
    assert len(lines) == 1
    assert "not on the site's list" in lines[0].getMessage()


def test_retention_deletes_old_guests_with_their_conversations_and_nothing_else() -> None:
    short, long = site_made(retention_days=7), site_made(retention_days=90)
    staff = User.objects.create_user("dana", password="pw-dana-123")
    Conversation.objects.create(owner=staff, title="staff's own")
    old = services.guest_enter(site=short, origin=HOST, token=None).guest
    recent = services.guest_enter(site=short, origin=HOST, token=None).guest
    old_elsewhere = services.guest_enter(site=long, origin=HOST, token=None).guest
    for guest in (old, recent, old_elsewhere):
        Conversation.objects.create(owner=guest.user, title=f"{guest.id}")
    now = timezone.now()
    Guest.objects.filter(id__in=[old.id, old_elsewhere.id]).update(
        last_seen_at=now - datetime.timedelta(days=8)
    )

    assert services.guests_delete_expired(now) == 1

    assert set(Guest.objects.values_list("id", flat=True)) == {recent.id, old_elsewhere.id}
    assert not User.objects.filter(pk=old.user_id).exists()
    assert set(Conversation.objects.values_list("title", flat=True)) == {
        "staff's own",
        str(recent.id),
        str(old_elsewhere.id),
    }
