"""The WebSocket routes, and the Origin check every handshake passes before them.

Browsers send cookies with cross-site WebSocket handshakes and a socket has no CSRF token, so
the Origin header is what tells our pages from any other. Channels' AllowedHostsOriginValidator
matches ALLOWED_HOSTS by host alone, so any port or scheme of an allowed host passed (another
program on the same machine, or a plain-http page anyone on the path can alter).
`TrustedOriginValidator` applies Django's CSRF origin rule instead: an origin is
scheme://host[:port], allowed when it is the page's own origin (Host, checked against
ALLOWED_HOSTS, with the scheme the connection came in on) or listed in CSRF_TRUSTED_ORIGINS.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest
from django.urls import path
from django.utils.http import is_same_domain

from chatapp.realtime.agents import AgentConsumer
from chatapp.realtime.consumers import ChatConsumer
from chatapp.realtime.guests import GuestChatConsumer

Scope = dict[str, Any]
Asgi = Any  # an ASGI application (channels has no types of its own)

websocket_urlpatterns = [
    path("ws/chat/", ChatConsumer.as_asgi()),
    path("ws/guest/<str:site_key>/", GuestChatConsumer.as_asgi()),
    path("ws/agent/", AgentConsumer.as_asgi()),
]


class _Handshake(HttpRequest):
    """The handshake as a Django request, so `get_host()` and `is_secure()` are Django's own
    (ALLOWED_HOSTS, USE_X_FORWARDED_HOST, SECURE_PROXY_SSL_HEADER)."""

    def __init__(self, scope: Scope) -> None:
        super().__init__()
        self._scheme = "https" if scope.get("scheme") == "wss" else "http"
        server = scope.get("server") or ("unknown", "0")
        self.META["SERVER_NAME"] = str(server[0])
        self.META["SERVER_PORT"] = str(server[1])
        for raw_name, raw_value in scope.get("headers", []):
            name = "HTTP_" + raw_name.decode("latin1").upper().replace("-", "_")
            value = raw_value.decode("latin1")
            # repeated headers are joined, as Django's ASGI handler does
            self.META[name] = f"{self.META[name]},{value}" if name in self.META else value

    def _get_scheme(self) -> str:
        return self._scheme


def origin_allowed(origin: str, request: HttpRequest) -> bool:
    """Django's CsrfViewMiddleware._origin_verified, read from settings on each call."""
    try:
        own = f"{'https' if request.is_secure() else 'http'}://{request.get_host()}"
    except DisallowedHost:
        pass  # a Host not in ALLOWED_HOSTS is nobody's own origin
    else:
        if origin == own:
            return True
    trusted = settings.CSRF_TRUSTED_ORIGINS
    if origin in (o for o in trusted if "*" not in o):
        return True
    try:
        parsed = urlsplit(origin)
    except ValueError:
        return False
    return any(
        is_same_domain(parsed.netloc, wildcard.netloc.lstrip("*"))
        for wildcard in (urlsplit(o) for o in trusted if "*" in o)
        if wildcard.scheme == parsed.scheme
    )


class TrustedOriginValidator:
    """Closes, before accepting, every handshake whose Origin is not allowed (see above)."""

    def __init__(self, application: Asgi) -> None:
        self.application = application

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> Any:
        if scope["type"] != "websocket":
            raise ValueError("TrustedOriginValidator only guards WebSocket connections")
        origins = [v for k, v in scope.get("headers", []) if k.lower() == b"origin"]
        # none, or several (which one would the browser have meant?): refused
        if len(origins) == 1 and origin_allowed(origins[0].decode("latin1"), _Handshake(scope)):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
