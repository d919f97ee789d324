"""Errors in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}` with the status
OpenAI's clients expect (their SDKs pick the exception class from the status)."""

from __future__ import annotations

import math
from typing import Literal

from django.http import JsonResponse

from chatapp.admission.limiter import Refused
from chatapp.answers.entries import LoggedEnd

ErrorType = Literal[
    "invalid_request_error",
    "authentication_error",
    "not_found_error",
    "rate_limit_error",
    "service_unavailable_error",
    "server_error",
]


class ApiError(Exception):
    def __init__(
        self,
        *,
        status: int,
        message: str,
        type: ErrorType = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.retry_after_s = retry_after_s

    def body(self) -> dict[str, dict[str, str | None]]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> JsonResponse:
        response = JsonResponse(self.body(), status=self.status)
        if self.retry_after_s is not None:
            response["Retry-After"] = str(max(1, math.ceil(self.retry_after_s)))
        return response


def invalid(message: str, *, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(status=400, message=message, param=param, code=code)


# A failure worth retrying later (with Retry-After): its status, type and code, by the
# admission refusal or the relay's end code that says it.
_RETRY_LATER: dict[str, tuple[int, ErrorType, str]] = {
    "no_worker": (503, "service_unavailable_error", "no_worker"),
    "busy": (429, "rate_limit_error", "server_busy"),
    "timeout": (504, "service_unavailable_error", "first_token_timeout"),
    "worker_lost": (503, "service_unavailable_error", "worker_lost"),
}

# The relay's end codes after which asking again later makes sense (other edges say so too).
RETRY_LATER_CODES = frozenset(_RETRY_LATER)


def _retry_later(reason: str, message: str, retry_after_s: float) -> ApiError:
    status, type, code = _RETRY_LATER[reason]
    return ApiError(
        status=status, type=type, code=code, message=message, retry_after_s=retry_after_s
    )


def refused(decision: Refused) -> ApiError:
    """Admission's refusal: 503 when no worker runs, 429 (with Retry-After) otherwise."""
    if decision.reason in ("no_worker", "busy"):
        return _retry_later(decision.reason, decision.message, decision.retry_after_s)
    if decision.reason == "user_concurrency":
        code = "concurrency_limit_exceeded"
        message = "This API key already has its maximum of answers in progress; retry later."
    else:
        code = "rate_limit_exceeded"
        message = (
            "This API key sent more requests than its rate limit allows; "
            f"retry in {decision.retry_after_s:g} s."
        )
    return ApiError(
        status=429,
        type="rate_limit_error",
        code=code,
        message=message,
        retry_after_s=decision.retry_after_s,
    )


def answer_failed(end: LoggedEnd, *, retry_after_s: float) -> ApiError:
    """An answer that failed before its first token, by its end's code (the relay's)."""
    error_code = end.error_code
    message = end.error_message or "The answer failed."
    if error_code == "too_long":  # OpenAI's code, which clients check to trim the history
        return invalid(message, param="messages", code="context_length_exceeded")
    if error_code == "invalid":
        return invalid(message, code="invalid_request")
    if error_code in _RETRY_LATER:
        return _retry_later(error_code, message, retry_after_s)
    return ApiError(status=500, type="server_error", code=error_code or "engine", message=message)
