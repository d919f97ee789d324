"""/v1's refusals as gRPC statuses: the same codes and messages, with Retry-After as metadata.

A refusal ends the stream (`context.abort`); the status details carry the message, the trailing
metadata `error-code` carries /v1's code (e.g. `rate_limit_exceeded`) and `retry-after` the
seconds to wait when trying again makes sense.
"""

from __future__ import annotations

import math
from typing import Any, NoReturn

import grpc

from chatapp.openai_api.errors import ApiError

_STATUS_OF_HTTP = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.NOT_FOUND,
    409: grpc.StatusCode.ALREADY_EXISTS,
    413: grpc.StatusCode.INVALID_ARGUMENT,
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    503: grpc.StatusCode.UNAVAILABLE,  # no worker runs
    504: grpc.StatusCode.DEADLINE_EXCEEDED,
}


def status_of(exc: ApiError) -> grpc.StatusCode:
    """429 (the service is busy, the key's rate or concurrency) is RESOURCE_EXHAUSTED."""
    return _STATUS_OF_HTTP.get(exc.status, grpc.StatusCode.INTERNAL)


def invalid_argument(message: str) -> ApiError:
    return ApiError(status=400, code="invalid", message=message)


async def abort_with(context: grpc.aio.ServicerContext[Any, Any], exc: ApiError) -> NoReturn:
    metadata: list[tuple[str, str]] = [("error-code", exc.code or "")]
    if exc.retry_after_s is not None:
        metadata.append(("retry-after", str(max(1, math.ceil(exc.retry_after_s)))))
    context.set_trailing_metadata(tuple(metadata))
    await context.abort(status_of(exc), exc.message)
    raise AssertionError("context.abort raises")  # pragma: no cover
