"""Settings shared by every environment. Everything deploy-specific comes from the env."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import django_stubs_ext

from chatapp.settings.database import database_settings
from inference.settings import DEFAULT_MODEL_DIR_NAME, data_dir_from_env
from inference.transport import redis_layer_config

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
if REDIS_URL:
    CHANNEL_LAYERS: dict[str, Any] = {
        "default": {
            "BACKEND": "inference.resilient_layer.ResilientRedisChannelLayer",
            "CONFIG": redis_layer_config(redis_url=REDIS_URL),
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# The in-memory layer only reaches consumers of this process, so without Redis the inference
# worker must run inside the web process.
CHAT_EMBEDDED_WORKER = not REDIS_URL

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# Login throttling (django-axes, chatapp/web/login_throttle.py): LOGIN_FAILURE_LIMIT failed
# logins of one username, or from one client address, each counted on its own, lock that
# username or address for LOGIN_COOLOFF_S after the last failure; a locked login gets the
# login page with HTTP 429 and Retry-After, even with the right password. Behind reverse
# proxies set LOGIN_THROTTLE_PROXY_COUNT (how many append to X-Forwarded-For), or every client
# has the proxy's address and one address's limit locks everybody out.
LOGIN_FAILURE_LIMIT = int(os.environ.get("LOGIN_FAILURE_LIMIT", "10"))
LOGIN_COOLOFF_S = float(os.environ.get("LOGIN_COOLOFF_S", "900"))
LOGIN_THROTTLE_PROXY_COUNT = int(os.environ.get("LOGIN_THROTTLE_PROXY_COUNT", "0"))
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
}
CHAT_WARMUP_TIMEOUT_S = float(os.environ.get("CHAT_WARMUP_TIMEOUT_S", "60"))

# Chat limits (see docs/protocol.md)
CHAT_MAX_FRAME_BYTES = int(os.environ.get("CHAT_MAX_FRAME_BYTES", "65536"))
CHAT_MAX_MESSAGE_CHARS = int(os.environ.get("CHAT_MAX_MESSAGE_CHARS", "8000"))
# The worker fits the history to the model's context by tokens; this only bounds what is sent.
CHAT_HISTORY_MAX_MESSAGES = int(os.environ.get("CHAT_HISTORY_MAX_MESSAGES", "200"))
CHAT_ACCEPT_TIMEOUT_S = float(os.environ.get("CHAT_ACCEPT_TIMEOUT_S", "30"))
# Past the accept timeout a request still waits while live workers are busy, up to this.
CHAT_QUEUE_TIMEOUT_S = float(os.environ.get("CHAT_QUEUE_TIMEOUT_S", "120"))
# No event (delta or the worker's heartbeat, every INFERENCE_HEARTBEAT_S) for this long after
# the worker accepted: the worker is taken as lost and the answer fails with what it had.
CHAT_STALL_TIMEOUT_S = float(os.environ.get("CHAT_STALL_TIMEOUT_S", "10"))
# A socket that drops leaves its answer generating this long, so a refresh can resume it;
# nobody back by then: the generation is aborted and the answer kept as stopped.
CHAT_DISCONNECT_GRACE_S = float(os.environ.get("CHAT_DISCONNECT_GRACE_S", "30"))
# How long an answer's stream log stays resumable after its last entry (Redis stream TTL).
CHAT_ANSWER_LOG_TTL_S = float(os.environ.get("CHAT_ANSWER_LOG_TTL_S", "3600"))
# The relay owning an answer's run tells watchers, the log and admission it is alive this
# often; a run whose owner is silent for CHAT_REAP_AFTER_S is taken as orphaned (its web
# process died): whoever finds it (a resuming socket, the API request watching it, the reaper
# of any web process every CHAT_REAP_EVERY_S) ends it from its log, frees its admission lease
# and cancels its worker request.
CHAT_RELAY_HEARTBEAT_S = float(os.environ.get("CHAT_RELAY_HEARTBEAT_S", "2"))
CHAT_REAP_AFTER_S = float(
    os.environ.get("CHAT_REAP_AFTER_S", str(max(5.0, 4 * CHAT_RELAY_HEARTBEAT_S)))
)
CHAT_REAP_EVERY_S = float(os.environ.get("CHAT_REAP_EVERY_S", "5"))
# Admission control (docs/operations.md): past these the user gets "busy" with a retry-after.
CHAT_USER_MAX_CONCURRENT = int(os.environ.get("CHAT_USER_MAX_CONCURRENT", "3"))
CHAT_USER_RATE = int(os.environ.get("CHAT_USER_RATE", "30"))
CHAT_USER_RATE_WINDOW_S = float(os.environ.get("CHAT_USER_RATE_WINDOW_S", "60"))
# An admitted run's lease; its owner renews it every heartbeat, so a dead owner's slots come
# back this long after its last heartbeat even if nobody ends its runs.
CHAT_ADMISSION_LEASE_S = float(
    os.environ.get("CHAT_ADMISSION_LEASE_S", str(max(10.0, 5 * CHAT_RELAY_HEARTBEAT_S)))
)
CHAT_BUSY_RETRY_AFTER_S = float(os.environ.get("CHAT_BUSY_RETRY_AFTER_S", "5"))
# Answer standalone questions from approved FAQ entries before the model (see docs/protocol.md)
CHAT_FAQ_ENABLED = os.environ.get("CHAT_FAQ_ENABLED", "1") == "1"
CHAT_MAX_TOKENS = int(os.environ.get("CHAT_MAX_TOKENS", "0")) or None
# Per-socket frame budget (chatapp/realtime/frame_budget.py): token buckets, far above what a
# person produces; a frame past them gets a "rate_limited" error with retry_after_s. A
# chat.resume may replay a whole answer log, so it has its own smaller budget. 0: no limit.
CHAT_SOCKET_FRAMES_PER_S = float(os.environ.get("CHAT_SOCKET_FRAMES_PER_S", "5"))
CHAT_SOCKET_FRAME_BURST = int(os.environ.get("CHAT_SOCKET_FRAME_BURST", "20"))
CHAT_SOCKET_RESUMES_PER_S = float(os.environ.get("CHAT_SOCKET_RESUMES_PER_S", "0.2"))
CHAT_SOCKET_RESUME_BURST = int(os.environ.get("CHAT_SOCKET_RESUME_BURST", "3"))

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
