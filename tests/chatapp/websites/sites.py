"""A site to embed the widget on, made as admin saves one."""

from __future__ import annotations

from typing import Any

from chatapp.websites.models import Site

HOST = "http://127.0.0.1:8001"  # the host page's origin in these tests


def site_made(**changes: Any) -> Site:
    site = Site(**{"name": "Shop", "allowed_origins": HOST, **changes})
    site.full_clean()
    site.save()
    return site
