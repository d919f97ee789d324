"""The `DATABASES["default"]` entry, from `DATABASE_URL` and the `DB_*` variables.

SQLite (the embedded default) uses immediate transactions and waits for the write lock: see
`SQLITE_OPTIONS`.

Under ASGI every request's database work runs on a thread of its own, so a connection kept per
thread (`CONN_MAX_AGE` > 0) outlives its thread and is never reused: a hundred requests a
minute exhaust PostgreSQL's `max_connections`. No connection is kept per thread here
(`CONN_MAX_AGE=0`); on PostgreSQL a process-wide psycopg pool (Django's native `pool` option)
bounds and reuses them instead: at most `DB_POOL_MAX_SIZE` per process, and a request that
finds them all busy waits up to `DB_POOL_TIMEOUT_S`, then gets a clear "unavailable" error
(`chatapp/unavailable.py`) rather than hanging. See docs/operations.md for sizing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

# SQLite (the embedded default). Answers are stored on threads of their own while sockets read
# and then write on others. In SQLite's default (DEFERRED) transactions a transaction that has
# read cannot wait for the write lock another connection holds: SQLite fails it at once with
# "database is locked" (waiting could deadlock), whatever the timeout. IMMEDIATE takes the
# write lock at BEGIN, where waiting is safe, so concurrent writers queue instead; readers
# outside a transaction are not blocked by it. The app's transactions (`atomic`) all write, so
# taking the lock up front costs them nothing (Django admin's change form also holds it while
# it renders: milliseconds). `timeout` is how long a writer queues (the busy handler) before
# the user is told "unavailable": writes here take milliseconds, so 20 s is only reached by a
# database that is really stuck.
SQLITE_OPTIONS: dict[str, Any] = {"transaction_mode": "IMMEDIATE", "timeout": 20}


def _number(name: str, default: float, *, minimum: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum:g}, got {raw!r}")
    return value


def _integer(name: str, default: int, *, minimum: int) -> int:
    value = _number(name, default, minimum=minimum)
    if value != int(value):
        raise ImproperlyConfigured(f"{name} must be a whole number, got {value:g}")
    return int(value)


def database_settings(*, data_dir: Path) -> dict[str, Any]:
    """SQLite in the data dir unless `DATABASE_URL` says otherwise."""
    config: dict[str, Any] = dj_database_url.config(
        default=f"sqlite:///{data_dir / 'db.sqlite3'}", conn_max_age=0
    )
    if config.get("ENGINE") == "django.db.backends.sqlite3":
        config.setdefault("OPTIONS", {}).update(SQLITE_OPTIONS)
    if config.get("ENGINE") != "django.db.backends.postgresql":
        return config
    options: dict[str, Any] = config.setdefault("OPTIONS", {})
    # libpq waits this long for an unreachable server (its default is forever).
    options["connect_timeout"] = _integer("DB_CONNECT_TIMEOUT_S", 5, minimum=1)
    statement_timeout_s = _number("DB_STATEMENT_TIMEOUT_S", 30, minimum=0)
    if statement_timeout_s:  # a query stuck behind a lock fails instead of holding a request
        options["options"] = f"-c statement_timeout={int(statement_timeout_s * 1000)}"
    if os.environ.get("DB_POOL", "1").strip() in ("0", "false", "no", "off"):
        return config
    min_size = _integer("DB_POOL_MIN_SIZE", 2, minimum=0)
    max_size = _integer("DB_POOL_MAX_SIZE", 10, minimum=1)
    if min_size > max_size:
        raise ImproperlyConfigured(
            f"DB_POOL_MIN_SIZE ({min_size}) must not exceed DB_POOL_MAX_SIZE ({max_size})"
        )
    options["pool"] = {
        "min_size": min_size,
        "max_size": max_size,
        "timeout": _number("DB_POOL_TIMEOUT_S", 5, minimum=0.1),
        # an idle connection above min_size is closed after this (psycopg's default is 10 min)
        "max_idle": _number("DB_POOL_MAX_IDLE_S", 300, minimum=1),
    }
    # The pool checks a connection before lending it (one empty round trip), so connections
    # broken by a database restart are replaced instead of failing one request each.
    config["CONN_HEALTH_CHECKS"] = True
    return config
