"""The widget's socket: a guest visitor of a website chats here, with its token, never a session.

Browsers cannot set headers on a WebSocket, and a token in the URL ends up in access logs, so
the panel offers two subprotocols, `chat.guest.v1` and its token; the socket answers with the
first. The token must be the site's (the path names the site), unexpired, for a guest that
still exists, issued on an origin still on the site's list. A refused token still gets the
socket accepted, then closed at once with 4401 and the reason in words (a close before accept
reaches the page as a bare 1006), and nothing of it is stored. Past that, a guest is a user
like any other, with its site's per-visitor limits.
"""

from __future__ import annotations

from channels.db import database_sync_to_async

from chatapp.admission.limiter import AdmissionLimits
from chatapp.answers.runtime import admission_limits_of
from chatapp.realtime.consumers import ChatConsumer
from chatapp.realtime.starting import StartPolicy
from chatapp.websites.models import Site
from chatapp.websites.services import WidgetRefused, guest_of_token
from chatapp.websites.tokens import TokenRefused

GUEST_PROTOCOL = "chat.guest.v1"
# Close codes the panel acts on: start over without the token / show "not available".
TOKEN_REFUSED = 4401
WIDGET_REFUSED = 4403


def visitor_limits(site: Site) -> AdmissionLimits:
    """The service's limits with the site's per-visitor rate and concurrency."""
    return admission_limits_of(
        rate=site.visitor_rate,
        rate_window_s=site.visitor_rate_window_s,
        max_concurrent=site.visitor_max_concurrent,
    )


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
            default_template_id=entry.site.default_template_id,
            template_ids=template_ids,
        )
        # The session's user, if the browser sent a staff cookie, is never this socket's.
        self.scope["user"] = entry.guest.user
        await self.open_for(entry.guest.user, policy=policy, subprotocol=GUEST_PROTOCOL)

    async def _close_with(self, code: int, reason: str, offered: list[str]) -> None:
        await self.accept(subprotocol=GUEST_PROTOCOL if GUEST_PROTOCOL in offered else None)
        await self.close(code=code, reason=reason)
