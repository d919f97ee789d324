"""Guests enter a site's widget and come back; the retention sweep deletes the ones gone.

Every way in checks the same three things: the site exists and is enabled, the host page's
origin is on its list (now, not when the token was issued: removing an origin cuts its guests
off), and a token shown was issued for this site and has not expired.
"""

from __future__ import annotations

import datetime
import logging
import math
import uuid
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from chatapp.errors import ApplicationError
from chatapp.websites.models import Guest, Site
from chatapp.websites.tokens import GuestClaim, TokenRefused, guest_claim, guest_token

logger = logging.getLogger(__name__)

_DAY_S = 86_400.0
_LOGGED_REFUSALS_MAX = 1024
_logged_refusals: set[tuple[str, str]] = set()


class NewVisitorsLimited(ApplicationError):
    """Too many new visitors from one network address within the hour."""

    code = "rate_limited"

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"Too many new chats from your network. Try again in {retry_after_s} s.")
        self.retry_after_s = retry_after_s


class WidgetRefused(ApplicationError):
    """No widget here: the site is unknown or off, or the page's origin is not on its list."""

    code = "widget_refused"


@dataclass(frozen=True, slots=True)
class GuestEntry:
    site: Site
    guest: Guest
    token: str  # a fresh one: each visit moves the expiry to retention_days from now


def _refusal_logged_once(site_key: str, origin: str, why: str) -> None:
    # A page embedding a wrong snippet asks on every view; one line per (site, origin) and
    # process says what is wrong without filling the log.
    if (site_key, origin) in _logged_refusals:
        return
    if len(_logged_refusals) >= _LOGGED_REFUSALS_MAX:
        _logged_refusals.clear()
    _logged_refusals.add((site_key, origin))
    logger.warning("widget refused for site %r on origin %r: %s", site_key, origin, why)


def site_allowing(site_key: str, origin: str) -> Site:
    """The enabled site of `site_key` if `origin` may show its widget, else WidgetRefused."""
    return _site_allows(Site.objects.filter(key=site_key).first(), site_key, origin)


def _site_allows(site: Site | None, site_key: str, origin: str) -> Site:
    if site is None or not site.enabled:
        why = "no such site" if site is None else "the site is disabled"
        _refusal_logged_once(site_key, origin, why)
        raise WidgetRefused("This chat is not available.")
    if origin not in site.origins:
        _refusal_logged_once(site_key, origin, "the origin is not on the site's list")
        raise WidgetRefused("This chat is not available on this website.")
    return site


def _retention_s(site: Site) -> float:
    return site.retention_days * _DAY_S


def address_hash(address: str) -> str:
    """A keyed hash of a network address: comparable, not reversible without SECRET_KEY."""
    return salted_hmac("chatapp.websites.address", address).hexdigest()


def address_group(site: Site, address: str | None) -> str | None:
    """The admission group of a site's visitors from one network address (their shared
    `address_rate` and `address_max_concurrent`); None when the address is unknown."""
    if not address:
        return None
    return f"site{site.pk}.{address_hash(address)[:32]}"


def _new_visitors_check(site: Site, hashed: str) -> None:
    hour_ago = timezone.now() - datetime.timedelta(hours=1)
    recent = Guest.objects.filter(site=site, address_hash=hashed, created_at__gte=hour_ago)
    if recent.count() < site.new_visitors_per_address:
        return
    oldest = recent.order_by("created_at").values_list("created_at", flat=True).first()
    wait = (oldest or hour_ago) + datetime.timedelta(hours=1) - timezone.now()
    raise NewVisitorsLimited(max(1, math.ceil(wait.total_seconds())))


def _guest_new(site: Site, origin: str, address: str | None) -> Guest:
    hashed = address_hash(address) if address else ""
    if hashed:
        _new_visitors_check(site, hashed)
    with transaction.atomic():
        guest_id = uuid.uuid4()
        user = User(username=f"guest-{guest_id.hex}")
        user.set_unusable_password()  # never logs in: only its token speaks for it
        user.save()
        return Guest.objects.create(
            id=guest_id, site=site, user=user, origin=origin, address_hash=hashed
        )


def _guest_known(site: Site, token: str) -> tuple[Guest, GuestClaim]:
    claim = guest_claim(token, site_key=site.key, max_age_s=_retention_s(site))
    guest = Guest.objects.select_related("user").filter(id=claim.guest_id, site=site).first()
    if guest is None:  # deleted by the retention sweep
        raise TokenRefused("expired")
    return guest, claim


def guest_enter(
    *, site: Site, origin: str, token: str | None, address: str | None = None
) -> GuestEntry:
    """The widget of `site` (as read for this request) opens on `origin`: the guest of
    `token`, or a new one without a token (at most the site's `new_visitors_per_address` an
    hour from one `address`, else NewVisitorsLimited).

    A token that fails (forged, expired, another site's) raises TokenRefused; the widget drops
    it and enters again without one, so a visitor always gets a chat, never someone else's."""
    _site_allows(site, site.key, origin)
    if token:
        guest, _ = _guest_known(site, token)
        guest.origin = origin
        guest.last_seen_at = timezone.now()
        guest.save(update_fields=["origin", "last_seen_at"])
    else:
        guest = _guest_new(site, origin, address)
    return GuestEntry(site, guest, guest_token(GuestClaim(site.key, guest.id, origin)))


def guest_of_token(*, site_key: str, token: str) -> GuestEntry:
    """The guest a socket's token speaks for, checked as `guest_enter` checks it (the origin
    is the one the token was issued on). Raises WidgetRefused or TokenRefused."""
    site = Site.objects.filter(key=site_key).first()
    if site is None:
        raise WidgetRefused("This chat is not available.")
    guest, claim = _guest_known(site, token)
    _site_allows(site, site_key, claim.origin)
    Guest.objects.filter(id=guest.id).update(last_seen_at=timezone.now())
    return GuestEntry(site, guest, token)


def guests_delete_expired(now: datetime.datetime | None = None) -> int:
    """Delete every guest (its user, conversations and answers) whose last visit is older than
    its site's retention; returns how many. Nothing else is touched."""
    now = now or timezone.now()
    deleted = 0
    for site in Site.objects.all():
        cutoff = now - datetime.timedelta(days=site.retention_days)
        users = User.objects.filter(guest__site=site, guest__last_seen_at__lt=cutoff)
        count = users.count()
        if count:
            users.delete()
            deleted += count
    return deleted
