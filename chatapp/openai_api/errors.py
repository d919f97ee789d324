"""Errors in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}` with the status
OpenAI's clients expect (their SDKs pick the exception class from the status)."""

from __future__ import annotations

import math
from typing import Literal

from django.http import JsonResponse

from chatapp.admission.limiter import Refused

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


def refused(decision: Refused) -> ApiError:
    """Admission's refusal: 503 when no worker runs, 429 (with Retry-After) otherwise."""
    if decision.reason == "no_worker":
        return ApiError(
            status=503,
            type="service_unavailable_error",
            code="no_worker",
            message=decision.message,
            retry_after_s=decision.retry_after_s,
        )
    code = {
        "rate_limited": "rate_limit_exceeded",
        "user_concurrency": "concurrency_limit_exceeded",
    }.get(decision.reason, "server_busy")
    message = decision.message
    if decision.reason == "user_concurrency":
        message = "This API key already has its maximum of answers in progress; retry later."
    elif decision.reason == "rate_limited":
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


def answer_failed(*, error_code: str, message: str, retry_after_s: float) -> ApiError:
    """An answer that failed before its first token (the relay's end codes)."""
    if error_code == "too_long":  # OpenAI's code, which clients check to trim the history
        return invalid(message, param="messages", code="context_length_exceeded")
    if error_code == "invalid":
        return invalid(message, code="invalid_request")
    if error_code == "no_worker":
        return ApiError(
            status=503,
            type="service_unavailable_error",
            code="no_worker",
            message=message,
            retry_after_s=retry_after_s,
        )
    if error_code == "busy":
        return ApiError(
            status=429,
            type="rate_limit_error",
            code="server_busy",
            message=message,
            retry_after_s=retry_after_s,
        )
    if error_code == "timeout":
        return ApiError(
            status=504,
            type="service_unavailable_error",
            code="first_token_timeout",
            message=message,
            retry_after_s=retry_after_s,
        )
    if error_code == "worker_lost":
        return ApiError(
            status=503,
            type="service_unavailable_error",
            code="worker_lost",
            message=message,
            retry_after_s=retry_after_s,
        )
    return ApiError(status=500, type="server_error", code=error_code or "engine", message=message)
