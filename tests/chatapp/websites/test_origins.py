"""Allowed origins are stored as browsers send them, and anything else is refused in words."""

from __future__ import annotations

import pytest

from chatapp.websites.origins import OriginError, origin_normalised, origins_parsed


@pytest.mark.parametrize(
    ("typed", "sent_by_browsers"),
    [
        ("https://shop.example", "https://shop.example"),
        ("  HTTPS://Shop.Example/ ", "https://shop.example"),
        ("https://shop.example:443", "https://shop.example"),
        ("http://127.0.0.1:8001", "http://127.0.0.1:8001"),
        ("http://localhost:80", "http://localhost"),
        ("http://[::1]:8080", "http://[::1]:8080"),
    ],
)
def test_an_origin_is_stored_as_the_browser_sends_it(typed: str, sent_by_browsers: str) -> None:
    assert origin_normalised(typed) == sent_by_browsers


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        ("shop.example", "https:// or http://"),
        ("ftp://shop.example", "https:// or http://"),
        ("https://", "no host"),
        ("https://*.shop.example", "wildcards"),
        ("https://shop.example/support", "leave out the path"),
        ("https://shop.example/?a=1", "leave out the path"),
        ("https://user:pw@shop.example", "user name or password"),
        ("https://shop.example:99999", "not an origin"),
    ],
)
def test_what_is_not_an_origin_is_refused_saying_why(typed: str, says: str) -> None:
    with pytest.raises(OriginError, match=says.replace("*", r"\*").replace("?", r"\?")):
        origin_normalised(typed)


def test_a_list_skips_blank_lines_drops_repeats_and_names_the_bad_line() -> None:
    assert origins_parsed("https://a.example\n\nhttps://A.example/\nhttp://b.example:8080\n") == (
        "https://a.example",
        "http://b.example:8080",
    )
    with pytest.raises(OriginError, match=r"line 2: 'b\.example'"):
        origins_parsed("https://a.example\nb.example")
