"""Point 2: the chat socket accepts only pages of this site (Django's CSRF origin rule).

Browsers send cookies with cross-site WebSocket handshakes and WebSockets have no CSRF
token, so the Origin check (`TrustedOriginValidator` in `chatapp/realtime/routing.py`) is what
stops an evil page from chatting as the logged-in user. An origin is scheme://host[:port]: it
passes when it is listed in CSRF_TRUSTED_ORIGINS or is the page's own (the handshake's Host,
which must be in ALLOWED_HOSTS, with the connection's scheme). Every refused case below carries
Alice's valid session cookie: only the Origin is wrong. The test settings allow localhost,
127.0.0.1 and testserver and trust http://localhost (what the socket tests send, with no Host);
tests/security/test_ws_origin.py covers ports, schemes and proxies in detail.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.models import User

from chatapp.answers.runtime import answer_runtime_close
from tests.conftest import Connect, RunningWorker
from tests.security.support import raw_socket
from tests.support.sockets import ask
from tests.support.users import client_for

pytestmark = pytest.mark.django_db(transaction=True)

FOREIGN_ORIGINS = [
    b"http://evil.example",
    b"http://localhost.evil.com",  # look-alike: starts with an allowed host
    b"http://evil.com.localhost.example",
    b"http://sub.localhost",  # a subdomain is another site unless listed with a leading dot
    b"http://localhost@evil.com",  # userinfo trick: the host is evil.com
    b"http://127.0.0.1.nip.io",
    b"http://localhost:8000",  # an allowed host on another port (no Host says it is ours)
    b"https://localhost",  # another scheme of the trusted http://localhost
    b"ws://localhost",
    b"null",  # sandboxed iframes and file:// pages
    b"",
]
# (Origin, Host, scheme the connection came in on)
ALLOWED_ORIGINS = [
    (b"http://localhost", None, "ws"),  # trusted
    (b"http://localhost:8000", b"localhost:8000", "ws"),  # the page's own origin
    (b"https://127.0.0.1:8443", b"127.0.0.1:8443", "wss"),
    (b"http://testserver", b"testserver", "ws"),
]


def test_the_allowed_hosts_are_what_this_module_assumes() -> None:
    assert set(settings.ALLOWED_HOSTS) == {"localhost", "127.0.0.1", "testserver"}
    assert settings.CSRF_TRUSTED_ORIGINS == ["http://localhost"]


@pytest.mark.parametrize("origin", FOREIGN_ORIGINS, ids=lambda o: o.decode() or "empty")
async def test_a_foreign_origin_is_refused_even_with_a_valid_session(
    connect: Connect, alice: User, origin: bytes
) -> None:
    ws = await connect(alice, origin=origin)
    connected, _ = await ws.connect()
    assert not connected


async def test_a_handshake_without_origin_is_refused(alice: User) -> None:
    client = await sync_to_async(client_for)(alice)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    ws = raw_socket([(b"cookie", cookie)])
    connected, _ = await ws.connect()
    assert not connected


@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    ALLOWED_ORIGINS,
    ids=lambda v: v.decode() if isinstance(v, bytes) else str(v),
)
async def test_an_allowed_origin_chats(
    alice: User,
    scripted_worker: RunningWorker,
    origin: bytes,
    host: bytes | None,
    scheme: str,
) -> None:
    client = await sync_to_async(client_for)(alice)
    headers = [
        (b"origin", origin),
        (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()),
    ]
    if host is not None:
        headers.append((b"host", host))
    ws = raw_socket(headers)
    ws.scope["scheme"] = scheme
    try:
        connected, _ = await ws.connect()
        assert connected
        frames = await ask(ws, "hello from my own page")
        assert frames[-1]["status"] == "complete"
    finally:
        await ws.disconnect()
        await answer_runtime_close()  # the relay belongs to this test's event loop
