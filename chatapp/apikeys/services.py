"""Writes for API keys: issue (the only moment the full key exists), revoke, note use."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from chatapp.apikeys.models import KEY_PREFIX, ApiKey, key_hash

# Writing last_used_at on every request would be a write per request: once a minute is enough.
TOUCH_EVERY = timedelta(seconds=60)


@dataclass(frozen=True, slots=True)
class IssuedKey:
    key: ApiKey
    secret: str  # the full key: show it once, never store it


def api_key_issue(*, key: ApiKey) -> str:
    """Give an unsaved key its secret and save it; returns the full key (shown once)."""
    assert key.pk is None, "a key's secret is made once, when it is created"
    for _ in range(5):  # 8 hex characters: a clash is rare, but possible
        prefix = secrets.token_hex(4)
        raw = f"{KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
        key.prefix, key.key_hash = prefix, key_hash(raw)
        try:
            with transaction.atomic():
                key.save()
        except IntegrityError:
            key.pk = None
            continue
        return raw
    raise RuntimeError("could not find a free key prefix")


def api_key_create(
    *,
    user: User,
    name: str,
    priority: str = ApiKey.Priority.INTERACTIVE,
    rate_limit: int = 60,
    rate_window_s: int = 60,
    max_concurrent: int = 4,
) -> IssuedKey:
    key = ApiKey(
        user=user,
        name=name,
        priority=priority,
        rate_limit=rate_limit,
        rate_window_s=rate_window_s,
        max_concurrent=max_concurrent,
    )
    key.full_clean(exclude=["prefix", "key_hash"])
    secret = api_key_issue(key=key)
    return IssuedKey(key=key, secret=secret)


def api_keys_revoke(*, key_ids: list[int]) -> int:
    """Revoke keys at once (requests with them get 401 from now on); how many were active."""
    return ApiKey.objects.filter(id__in=key_ids, revoked_at=None).update(revoked_at=timezone.now())


def api_key_touch(*, key: ApiKey) -> None:
    """Note that the key was used (at most once per TOUCH_EVERY)."""
    now = timezone.now()
    if key.last_used_at is not None and now - key.last_used_at < TOUCH_EVERY:
        return
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    key.last_used_at = now
