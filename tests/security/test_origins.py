"""Point 2: the chat socket accepts only pages of this site (Origin in ALLOWED_HOSTS).

Browsers send cookies with cross-site WebSocket handshakes and WebSockets have no CSRF
token, so the Origin check (`AllowedHostsOriginValidator` in `chatapp/asgi.py`) is what stops
an evil page from chatting as the logged-in user. Every refused case below carries Alice's
valid session cookie: only the Origin is wrong. The test settings allow
localhost, 127.0.0.1 and testserver.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.models import User

from tests.conftest import Connect, RunningWorker
from tests.security.support import client_for, raw_socket
from tests.support.sockets import receive_until, send_frame

pytestmark = pytest.mark.django_db(transaction=True)

FOREIGN_ORIGINS = [
    b"http://evil.example",
    b"http://localhost.evil.com",  # look-alike: starts with an allowed host
    b"http://evil.com.localhost.example",
    b"http://sub.localhost",  # a subdomain is another site unless listed with a leading dot
    b"http://localhost@evil.com",  # userinfo trick: the host is evil.com
    b"http://127.0.0.1.nip.io",
    b"null",  # sandboxed iframes and file:// pages
    b"",
]
ALLOWED_ORIGINS = [
    b"http://localhost",
    b"http://localhost:8000",
    b"https://127.0.0.1:8443",
    b"http://testserver",
]


def test_the_allowed_hosts_are_what_this_module_assumes() -> None:
    assert set(settings.ALLOWED_HOSTS) == {"localhost", "127.0.0.1", "testserver"}


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


@pytest.mark.parametrize("origin", ALLOWED_ORIGINS, ids=lambda o: o.decode())
async def test_an_allowed_origin_chats(
    connect: Connect, alice: User, scripted_worker: RunningWorker, origin: bytes
) -> None:
    ws = await connect(alice, origin=origin)
    connected, _ = await ws.connect()
    assert connected
    await ws.send_json_to(send_frame("hello from my own page"))
    frames = await receive_until(ws, "chat.done")
    assert frames[-1]["status"] == "complete"
