"""ASGI entry point: HTTP through Django, WebSockets through Channels.

Stack order follows Channels' docs: Django's ASGI app first (it sets up settings and apps),
then the origin check (Django's CSRF origin rule: CSRF_TRUSTED_ORIGINS or the page's own
scheme://host:port, see chatapp/realtime/routing.py) and session auth around the router.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings.local")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from chatapp.handoff import intents  # noqa: E402
from chatapp.realtime.routing import TrustedOriginValidator, websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": TrustedOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)

# Handoff's two word questions: loaded (trained first, in a child process, when missing) in a
# thread, off the path to Ready (docs/handoff.md).
intents.warm(settings.DATA_DIR / "intents")
