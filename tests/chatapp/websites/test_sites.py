"""Sites in admin: saved with their origins normalised, refused with a clear error otherwise."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from chatapp.websites.models import SITE_KEY_PREFIX, Site
from tests.support.admin import superuser_client

pytestmark = pytest.mark.django_db

SITE_ADD = reverse("admin:websites_site_add")


def site_form(origins: str, **changes: Any) -> dict[str, Any]:
    form = {
        "name": "Shop",
        "enabled": "on",
        "allowed_origins": origins,
        "title": "Chat with us",
        "greeting": "Hi!",
        "accent_colour": "#2563eb",
        "default_template": "",
        "visitor_rate": "10",
        "visitor_rate_window_s": "60",
        "visitor_max_concurrent": "1",
        "address_rate": "30",
        "address_max_concurrent": "4",
        "new_visitors_per_address": "20",
        "retention_days": "30",
        "_save": "Save",
    }
    form.update(changes)
    return form


def test_a_site_saved_in_admin_gets_a_key_and_origins_as_browsers_send_them() -> None:
    response = superuser_client().post(
        SITE_ADD, site_form("HTTPS://Shop.example/\nhttp://127.0.0.1:8001")
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    site = Site.objects.get()
    assert site.key.startswith(SITE_KEY_PREFIX)
    assert len(site.key) > 12
    assert site.origins == ("https://shop.example", "http://127.0.0.1:8001")


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"allowed_origins": "https://shop.example/support"}, "leave out the path"),
        ({"allowed_origins": "\n \n"}, "This field is required"),
        ({"accent_colour": "blue"}, "A colour is # and six hex digits."),
        ({"retention_days": "0"}, "greater than or equal to 1"),
        ({"visitor_rate": "0"}, "greater than or equal to 1"),
    ],
)
def test_a_bad_site_is_refused_with_a_clear_error_and_nothing_saved(
    changes: dict[str, str], error: str
) -> None:
    form = site_form("https://shop.example", **changes)
    response = superuser_client().post(SITE_ADD, form)
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not Site.objects.exists()


def test_the_site_page_shows_the_snippet_to_put_on_the_pages() -> None:
    client = superuser_client()
    client.post(SITE_ADD, site_form("https://shop.example"))
    site = Site.objects.get()
    page = client.get(
        reverse("admin:websites_site_change", args=[site.pk]), HTTP_HOST="localhost:8443"
    ).content.decode()
    # this server's own address, as the admin reaches it: ready to copy
    assert (
        '&lt;script src="http://localhost:8443/widget.js" '
        f'data-site="{site.key}" async&gt;&lt;/script&gt;'
    ) in page
