"""Settings shared by every environment. Everything deploy-specific comes from the env."""

from __future__ import annotations

import math
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import django_stubs_ext

from chatapp.settings.database import database_settings
from chatapp.settings.service import service_settings
from chatapp.settings.webhook import webhook_settings
from inference.settings import DEFAULT_MODEL_DIR_NAME, data_dir_from_env
from inference.wire.transport import redis_layer_config

# The web process's own settings, typed and bounded in chatapp/settings/service.py (see there
# for what each one does): a bad CHAT_* or LOGIN_* value stops start-up naming the variable.
CHAT, LOGIN = service_settings()
# The handoff webhook (chatapp/settings/webhook.py, docs/handoff.md#webhook): unset, none.
HANDOFF_WEBHOOK = webhook_settings()

# Lets admin/model generics be subscripted at runtime, as the type checker wants them.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent.parent
DATA_DIR = data_dir_from_env()

DEBUG = False
ALLOWED_HOSTS: list[str] = [h for h in os.environ.get("ALLOWED_HOSTS", "").split(",") if h]
CSRF_TRUSTED_ORIGINS: list[str] = [
    o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o
]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "chatapp",
    "chatapp.prompts",
    "chatapp.faq",
    "chatapp.conversations",
    "chatapp.web",
    "chatapp.maintenance",
    "chatapp.apikeys",
    "chatapp.websites",
    "chatapp.handoff",
    "chatapp.widget",
    "chatapp.latency",
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # A database outage in a view: 503 + Retry-After instead of a 500 (chatapp/unavailable.py).
    "chatapp.unavailable.DatabaseUnavailableMiddleware",
    # Serves static/ from the web process (daphne serves no static files itself).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as axes asks: turns a locked-out login into the 429 login page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "chatapp.urls"
ASGI_APPLICATION = "chatapp.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES: dict[str, Any] = {"default": database_settings(data_dir=DATA_DIR)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "")
# A request waits in the channel for a free worker until the relay gives up on it
# (CHAT_QUEUE_TIMEOUT_S): no message may expire before that (both layers drop at 60 s
# by default, which silently dropped requests queued behind a long answer).
CHANNEL_EXPIRY_S = math.ceil(max(60.0, CHAT.queue_timeout_s + 10))
if REDIS_URL:
    CHANNEL_LAYERS: dict[str, Any] = {
        "default": {
            "BACKEND": "inference.wire.resilient_layer.ResilientRedisChannelLayer",
            "CONFIG": redis_layer_config(redis_url=REDIS_URL, expiry_s=CHANNEL_EXPIRY_S),
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels.layers.InMemoryChannelLayer",
            # the same bounds as the Redis layer: the embedded relay's channel carries every
            # answer's events, and a queued request waits up to the queue timeout
            "CONFIG": {"capacity": 5000, "expiry": CHANNEL_EXPIRY_S},
        }
    }

# The in-memory layer only reaches consumers of this process, so without Redis the inference
# worker must run inside the web process.
CHAT_EMBEDDED_WORKER = not REDIS_URL

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# Login throttling (django-axes; chatapp/settings/service.py LoginSettings): a locked login
# gets the login page with HTTP 429 and Retry-After, even with the right password.
LOGIN_FAILURE_LIMIT = LOGIN.failure_limit
LOGIN_COOLOFF_S = LOGIN.cooloff_s
LOGIN_THROTTLE_PROXY_COUNT = LOGIN.throttle_proxy_count
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked login before any check
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(seconds=LOGIN_COOLOFF_S)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
# Counts in a cache, not the database: no row written per failure, and with Redis every web
# process sees the same counts.
AXES_HANDLER = "axes.handlers.cache.AxesCacheHandler"
AXES_CACHE = "login_throttle"
# A lock runs LOGIN_COOLOFF_S from the failure that reached the limit: attempts while locked
# do not extend it, so the Retry-After a user is shown (the whole cool-off) is never too short.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_CLIENT_IP_CALLABLE = "chatapp.web.login_throttle.client_ip"
AXES_LOCKOUT_CALLABLE = "chatapp.web.login_throttle.lockout_response"
# Its admin pages list database records, which the cache handler keeps none of.
AXES_ENABLE_ADMIN = False
AXES_VERBOSE = False  # no banner on every manage.py command
CACHES: dict[str, Any] = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    AXES_CACHE: (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "login-throttle",
        }
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    ),
}
# axes warns that an in-process cache is not shared between processes: without REDIS_URL there
# is one web process (the embedded default), so in-process counts are the right ones.
SILENCED_SYSTEM_CHECKS: list[str] = [] if REDIS_URL else ["axes.W001"]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Serve straight from STATICFILES_DIRS: no collectstatic step for the built, committed assets.
WHITENOISE_USE_FINDERS = True
# The widget's panel script is only ever referenced with its content hash (`panel.js?v=`,
# chatapp/widget/views.py), so browsers may keep it for good; everything else revalidates.
WHITENOISE_IMMUTABLE_FILE_TEST = r"/panel\.js$"

# Celery: eager (in the web process) in the embedded default, Redis-backed otherwise.
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_IGNORE_RESULT = True
# Background jobs need few processes; each one is a PostgreSQL pool of its own (operations.md).
CELERY_WORKER_CONCURRENCY = int(os.environ.get("CELERY_CONCURRENCY", "2"))
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# `celery -A chatapp beat` (the celery-beat service) runs these.
CELERY_BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    "clear-expired-sessions": {
        "task": "chatapp.maintenance.tasks.clear_expired_sessions",
        "schedule": 6 * 60 * 60.0,
    },
    "delete-expired-guests": {
        "task": "chatapp.websites.tasks.delete_expired_guests",
        "schedule": 6 * 60 * 60.0,
    },
    # Handoff webhook deliveries that are due again (a failed attempt's backoff has passed, or
    # a process died between storing one and sending it): handed to a sender. Cheap when none.
    "retry-handoff-webhooks": {
        "task": "chatapp.handoff.tasks.retry_handoff_webhooks",
        "schedule": 10.0,
    },
}
# The web process's own settings (CHAT, LOGIN above), each the Django setting of the same
# upper-case name.
CHAT_WARMUP_TIMEOUT_S = CHAT.warmup_timeout_s
CHAT_MAX_FRAME_BYTES = CHAT.max_frame_bytes
CHAT_MAX_MESSAGE_CHARS = CHAT.max_message_chars
CHAT_HISTORY_MAX_MESSAGES = CHAT.history_max_messages
CHAT_ACCEPT_TIMEOUT_S = CHAT.accept_timeout_s
CHAT_QUEUE_TIMEOUT_S = CHAT.queue_timeout_s
CHAT_AFFINITY = CHAT.affinity
CHAT_AFFINITY_WAIT_S = CHAT.affinity_wait_s
CHAT_AFFINITY_TTL_S = CHAT.affinity_ttl_s
CHAT_MAX_MIGRATIONS = CHAT.max_migrations
CHAT_STALL_TIMEOUT_S = CHAT.stall_timeout_s
CHAT_DISCONNECT_GRACE_S = CHAT.disconnect_grace_s
CHAT_ANSWER_LOG_TTL_S = CHAT.answer_log_ttl_s
CHAT_RELAY_HEARTBEAT_S = CHAT.relay_heartbeat_s
CHAT_REAP_AFTER_S = CHAT.reap_after_s
CHAT_REAP_EVERY_S = CHAT.reap_every_s
CHAT_USER_MAX_CONCURRENT = CHAT.user_max_concurrent
CHAT_USER_RATE = CHAT.user_rate
CHAT_USER_RATE_WINDOW_S = CHAT.user_rate_window_s
CHAT_ADMISSION_LEASE_S = CHAT.admission_lease_s
CHAT_BUSY_RETRY_AFTER_S = CHAT.busy_retry_after_s
CHAT_SSE_KEEPALIVE_S = CHAT.sse_keepalive_s
CHAT_FIRST_TOKEN_TIMEOUT_S = CHAT.first_token_timeout_s
CHAT_TYPING_PREFILL = CHAT.typing_prefill
CHAT_FAQ_ENABLED = CHAT.faq_enabled
CHAT_FAQ_THUMBS_DOWN_LIMIT = CHAT.faq_thumbs_down_limit
CHAT_FAQ_THUMBS_DOWN_WINDOW_S = CHAT.faq_thumbs_down_window_s
CHAT_MAX_TOKENS = CHAT.max_tokens or None
CHAT_SOCKET_FRAMES_PER_S = CHAT.socket_frames_per_s
CHAT_SOCKET_FRAME_BURST = CHAT.socket_frame_burst
CHAT_SOCKET_RESUMES_PER_S = CHAT.socket_resumes_per_s
CHAT_SOCKET_RESUME_BURST = CHAT.socket_resume_burst
CHAT_SOCKET_DRAFTS_PER_S = CHAT.socket_drafts_per_s
CHAT_SOCKET_DRAFT_BURST = CHAT.socket_draft_burst
CHAT_USER_DRAFT_EVERY_S = CHAT.user_draft_every_s
CHAT_TLS_CERT_FILE = CHAT.tls_cert_file
CHAT_TLS_KEY_FILE = CHAT.tls_key_file
CHAT_HANDOFF_WEBHOOK_URL = HANDOFF_WEBHOOK.url
CHAT_HANDOFF_WEBHOOK_SECRET = HANDOFF_WEBHOOK.secret
CHAT_HANDOFF_WEBHOOK_TIMEOUT_S = HANDOFF_WEBHOOK.timeout_s
CHAT_HANDOFF_WEBHOOK_ATTEMPTS = HANDOFF_WEBHOOK.attempts

# Prometheus /metrics (docs/metrics.md): with METRICS_TOKEN set, scrapes must send
# "Authorization: Bearer <token>" (401 otherwise); without it, only these networks get them
# (403 otherwise). Behind a reverse proxy every client has the proxy's address: set a token.
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
METRICS_ALLOWED_NETS: list[str] = [
    n.strip()
    for n in os.environ.get("METRICS_ALLOWED_NETS", "127.0.0.1/32,::1/128").split(",")
    if n.strip()
]
# The model id the OpenAI-compatible API (docs/api.md) answers to: the model folder's name.
CHAT_API_MODEL = (
    os.environ.get("CHAT_API_MODEL") or Path(os.environ.get("MODEL") or DEFAULT_MODEL_DIR_NAME).name
)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.channels.server": {"level": "WARNING"}},
}
