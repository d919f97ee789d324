"""`Authorization: Bearer <key>` -> the active API key, or a 401 in OpenAI's shape."""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.http import HttpRequest

from chatapp.apikeys import selectors, services
from chatapp.apikeys.models import ApiKey
from chatapp.openai_api.errors import ApiError


async def api_key_of(request: HttpRequest) -> ApiKey:
    header = request.headers.get("Authorization", "")
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise ApiError(
            status=401,
            code="missing_api_key",
            message="You didn't provide an API key. Send it as 'Authorization: Bearer <key>' "
            "(keys are created in the admin, under API keys).",
        )
    key: ApiKey | None = await database_sync_to_async(key_authenticate)(raw.strip())
    if key is None:
        raise ApiError(
            status=401,
            code="invalid_api_key",
            message="Incorrect API key provided (unknown or revoked).",
        )
    return key


def key_authenticate(raw: str) -> ApiKey | None:
    """The active key `raw` names (its last use noted), or None; also the gRPC service's."""
    key = selectors.api_key_authenticate(raw_key=raw)
    if key is not None:
        services.api_key_touch(key=key)
    return key
