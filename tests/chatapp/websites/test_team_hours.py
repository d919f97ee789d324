"""A site's team hours in admin: saved with their time zone, refused naming the bad line, blank
(as every site before them) always open."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.exceptions import ValidationError

from chatapp.websites.hours import is_open
from chatapp.websites.models import Site
from tests.chatapp.websites.sites import site_made
from tests.chatapp.websites.test_sites import SITE_ADD, site_form
from tests.support.admin import superuser_client

pytestmark = pytest.mark.django_db

SUNDAY_NOON_UTC = datetime(2025, 6, 8, 12, 0, tzinfo=UTC)


def test_hours_typed_in_admin_are_saved_with_their_time_zone() -> None:
    form = site_form(
        "https://shop.example",
        opening_hours="Mon-Fri 09:00-17:30\nSat 10:00-14:00",
        time_zone=" Europe/Berlin ",
    )
    response = superuser_client().post(SITE_ADD, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    site = Site.objects.get()
    assert site.time_zone == "Europe/Berlin"
    assert site.team_hours.zone.key == "Europe/Berlin"
    assert len(site.team_hours.spans) == 6
    assert not is_open(site.team_hours, SUNDAY_NOON_UTC)


@pytest.mark.parametrize(
    ("changes", "field", "error"),
    [
        (
            {"opening_hours": "Mon-Fri 09:00-17:30\nSat 10-14", "time_zone": "UTC"},
            "opening_hours",
            "line 2 ('Sat 10-14'): '10' is not a time",
        ),
        (
            {"opening_hours": "Mon 09:00-17:00", "time_zone": "Berlin"},
            "time_zone",
            "'Berlin' is not a time zone",
        ),
        (
            {"opening_hours": "Mon 09:00-17:00", "time_zone": ""},
            "time_zone",
            "Say which time zone the team hours are in",
        ),
    ],
)
def test_bad_hours_are_refused_naming_what_is_wrong(
    changes: dict[str, str], field: str, error: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        site_made(**changes)
    assert error in " ".join(refused.value.message_dict[field])
    response = superuser_client().post(SITE_ADD, site_form("https://shop.example", **changes))
    assert response.status_code == 200
    assert error.replace("'", "&#x27;") in response.content.decode()
    assert not Site.objects.exists()


def test_a_site_without_hours_is_always_open() -> None:
    site = site_made()
    assert (site.opening_hours, site.time_zone) == ("", "")
    assert site.team_hours.spans == ()
    assert is_open(site.team_hours, SUNDAY_NOON_UTC)


def test_hours_that_no_longer_read_count_as_always_open() -> None:
    site = site_made()
    Site.objects.filter(pk=site.pk).update(opening_hours="Mon 9-5", time_zone="Europe/Berlin")
    site.refresh_from_db()
    assert is_open(site.team_hours, SUNDAY_NOON_UTC)  # as before sites had hours
