"""The widget's socket: a guest visitor of a website chats here, with its token, never a session.

Browsers cannot set headers on a WebSocket, and a token in the URL ends up in access logs, so
the panel offers two subprotocols, `chat.guest.v1` and its token; the socket answers with the
first. The token must be the site's (the path names the site), unexpired, for a guest that
still exists, issued on an origin still on the site's list. A refused token still gets the
socket accepted, then closed at once with 4401 and the reason in words (a close before accept
reaches the page as a bare 1006), and nothing of it is stored. Past that, a guest is a user
like any other, with its site's per-visitor limits, and counted with the other visitors from
its network address against the site's per-address limits.
"""

from __future__ import annotations

from dataclasses import replace

from channels.db import database_sync_to_async

from chatapp.admission.limiter import AdmissionLimits, GroupLimits
from chatapp.answers.runtime import admission_limits_of
from chatapp.client_address import client_address
from chatapp.realtime.consumers import ChatConsumer
from chatapp.realtime.starting import StartPolicy
from chatapp.websites.models import Site
from chatapp.websites.services import WidgetRefused, address_group, guest_of_token
from chatapp.websites.tokens import TokenRefused

GUEST_PROTOCOL = "chat.guest.v1"
# Close codes the panel acts on: start over without the token / show "not available".
TOKEN_REFUSED = 4401
WIDGET_REFUSED = 4403


def visitor_limits(site: Site) -> AdmissionLimits:
    """The service's limits with the site's per-visitor and per-address rate and concurrency
    (both over the same window)."""
    limits = admission_limits_of(
        rate=site.visitor_rate,
        rate_window_s=site.visitor_rate_window_s,
        max_concurrent=site.visitor_max_concurrent,
    )
    per_address = GroupLimits(
        max_concurrent=site.address_max_concurrent,
        rate=site.address_rate,
        rate_window_s=float(site.visitor_rate_window_s),
    )
    return replace(limits, group=per_address)


class GuestChatConsumer(ChatConsumer):
    async def connect(self) -> None:
        offered = self.scope.get("subprotocols") or []
        site_key = self.scope["url_route"]["kwargs"]["site_key"]
        if len(offered) != 2 or offered[0] != GUEST_PROTOCOL:
            await self._close_with(TOKEN_REFUSED, "This chat needs a guest token.", offered)
            return
        try:
            entry = await database_sync_to_async(guest_of_token)(
                site_key=site_key, token=offered[1]
            )
        except TokenRefused as refused:
            await self._close_with(TOKEN_REFUSED, refused.message, offered)
            return
        except WidgetRefused as refused:
            await self._close_with(WIDGET_REFUSED, refused.message, offered)
            return
        template_ids = await database_sync_to_async(entry.site.template_ids)()
        policy = StartPolicy(
            limits=visitor_limits(entry.site),
            admission_group=address_group(entry.site, self._address()),
            default_template_id=entry.site.default_template_id,
            template_ids=template_ids,
        )
        # The session's user, if the browser sent a staff cookie, is never this socket's.
        self.scope["user"] = entry.guest.user
        await self.open_for(entry.guest.user, policy=policy, subprotocol=GUEST_PROTOCOL)

    def _address(self) -> str | None:
        headers = dict(self.scope.get("headers") or [])
        client = self.scope.get("client")
        return client_address(
            forwarded_for=headers.get(b"x-forwarded-for", b"").decode("latin-1"),
            remote=client[0] if client else None,
        )

    async def _close_with(self, code: int, reason: str, offered: list[str]) -> None:
        await self.accept(subprotocol=GUEST_PROTOCOL if GUEST_PROTOCOL in offered else None)
        await self.close(code=code, reason=reason)
