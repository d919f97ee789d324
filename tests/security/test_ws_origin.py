"""The socket's Origin check has Django's CSRF semantics: an origin is scheme://host[:port].

Allowed: an entry of CSRF_TRUSTED_ORIGINS (exact, or `https://*.example.com` for subdomains),
or the page's own origin: the handshake's Host (which must be in ALLOWED_HOSTS) with the
scheme the connection came in on (wss, or ws behind a proxy that says https through
SECURE_PROXY_SSL_HEADER). A host listed in ALLOWED_HOSTS is not enough on its own: another
port or scheme of it is another origin (another program, or a page served over plain http).
Every case carries Alice's valid session, so a refusal is the Origin check's.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import override_settings

from chatapp.answers.runtime import answer_runtime_close
from tests.security.support import raw_socket
from tests.support.users import client_for

pytestmark = pytest.mark.django_db(transaction=True)

Handshake = Callable[..., Coroutine[Any, Any, bool]]


@pytest.fixture
async def handshake(alice: User) -> AsyncIterator[Handshake]:
    """Opens a socket as Alice with this Origin, Host and scheme; True when it was accepted."""
    client = await sync_to_async(client_for)(alice)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    opened: list[WebsocketCommunicator] = []

    async def _handshake(
        origin: str,
        *,
        host: str | None = None,
        scheme: str = "ws",
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> bool:
        headers = [(b"origin", origin.encode()), (b"cookie", cookie), *(extra or [])]
        if host is not None:
            headers.append((b"host", host.encode()))
        ws = raw_socket(headers)
        ws.scope["scheme"] = scheme  # as daphne sets it: "wss" when TLS reached daphne
        opened.append(ws)
        connected, _ = await ws.connect()
        return bool(connected)

    yield _handshake
    for ws in opened:
        with contextlib.suppress(Exception):  # a refused socket has nothing left to close
            await ws.disconnect()
    await answer_runtime_close()


TRUSTED = override_settings(
    CSRF_TRUSTED_ORIGINS=["https://chat.example.com"],
    ALLOWED_HOSTS=["chat.example.com", "localhost"],
)


@TRUSTED
async def test_a_trusted_origin_is_accepted(handshake: Handshake) -> None:
    assert await handshake("https://chat.example.com")


@TRUSTED
@pytest.mark.parametrize(
    "origin",
    [
        "http://chat.example.com",  # same host, plain http: a page anyone on the path can alter
        "https://chat.example.com:8443",  # same host, another port: another program
        "http://chat.example.com:443",
        "wss://chat.example.com",
        "https://sub.chat.example.com",
    ],
)
async def test_another_scheme_or_port_of_a_trusted_origin_is_refused(
    handshake: Handshake, origin: str
) -> None:
    assert not await handshake(origin)


@override_settings(CSRF_TRUSTED_ORIGINS=[], ALLOWED_HOSTS=["localhost"])
async def test_without_trusted_origins_the_pages_own_origin_is_accepted(
    handshake: Handshake,
) -> None:
    assert await handshake("http://localhost:8000", host="localhost:8000")
    assert await handshake("https://localhost:8443", host="localhost:8443", scheme="wss")


@override_settings(CSRF_TRUSTED_ORIGINS=[], ALLOWED_HOSTS=["localhost"])
@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        ("http://localhost:9000", "localhost:8000", "ws"),  # another port of an allowed host
        ("http://localhost", "localhost:8000", "ws"),
        ("https://localhost:8000", "localhost:8000", "ws"),  # https page, but ws came in
        ("http://localhost:8443", "localhost:8443", "wss"),  # http page, TLS connection
        ("http://evil.example", "evil.example", "ws"),  # Host not in ALLOWED_HOSTS
        ("http://localhost:8000", None, "ws"),  # no Host: nothing to be the same as
    ],
)
async def test_without_trusted_origins_other_origins_are_refused(
    handshake: Handshake, origin: str, host: str | None, scheme: str
) -> None:
    assert not await handshake(origin, host=host, scheme=scheme)


@override_settings(
    CSRF_TRUSTED_ORIGINS=[],
    ALLOWED_HOSTS=["chat.example.com"],
    SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https"),
)
async def test_behind_a_tls_proxy_the_forwarded_scheme_counts(handshake: Handshake) -> None:
    https = [(b"x-forwarded-proto", b"https")]
    assert await handshake("https://chat.example.com", host="chat.example.com", extra=https)
    assert not await handshake("http://chat.example.com", host="chat.example.com", extra=https)
    assert not await handshake("https://chat.example.com", host="chat.example.com")


@override_settings(CSRF_TRUSTED_ORIGINS=["https://*.example.com"], ALLOWED_HOSTS=[".example.com"])
async def test_a_wildcard_trusted_origin_covers_subdomains_of_that_scheme_only(
    handshake: Handshake,
) -> None:
    assert await handshake("https://a.example.com")
    assert not await handshake("http://a.example.com")
    assert not await handshake("https://a.example.com.evil.net")


@TRUSTED
async def test_two_origin_headers_are_refused(handshake: Handshake) -> None:
    assert not await handshake(
        "https://chat.example.com", extra=[(b"origin", b"https://evil.example")]
    )
