"""Reads for API keys: which active key a presented secret is."""

from __future__ import annotations

import hmac

from chatapp.apikeys.models import KEY_PREFIX, ApiKey, key_hash


def api_key_authenticate(*, raw_key: str) -> ApiKey | None:
    """The active key whose secret this is; None for anything else (unknown, revoked, junk)."""
    if not raw_key.startswith(KEY_PREFIX) or len(raw_key) > 200:
        return None
    prefix, _, secret = raw_key.removeprefix(KEY_PREFIX).partition("_")
    if len(prefix) != 8 or not secret:
        return None
    key = (
        ApiKey.objects.select_related("user")
        .filter(prefix=prefix, revoked_at=None, user__is_active=True)
        .first()
    )
    if key is None or not hmac.compare_digest(key.key_hash, key_hash(raw_key)):
        return None
    return key
