"""Celery app: background jobs (template warm-ups now; titles and cleanup later).

The embedded default runs tasks eagerly in the web process (no broker); with `REDIS_URL` set,
`celery -A chatapp worker` consumes them from Redis.
"""

from __future__ import annotations

import os

from celery import Celery

from inference.wire.redis_client import BROKER_SOCKET_TIMEOUT_S, SOCKET_TIMEOUT_S, keepalive_options

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings.local")

app = Celery("chatapp")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Defaults under the settings (a CELERY_BROKER_TRANSPORT_OPTIONS setting replaces them): the web
# process publishes synchronously, so a half-open broker connection without a read timeout
# would hang that publish, and its request thread, forever. kombu reads these for Redis only.
app.add_defaults(
    {
        "broker_transport_options": {
            "socket_timeout": BROKER_SOCKET_TIMEOUT_S,
            "socket_connect_timeout": SOCKET_TIMEOUT_S,
            "socket_keepalive": True,
            "socket_keepalive_options": keepalive_options(),
        }
    }
)
app.autodiscover_tasks()
