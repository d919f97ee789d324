"""Turn a request body into a `ChatCompletionRequest`, or a 400 that names the parameter."""

from __future__ import annotations

import json

from pydantic import ValidationError

from chatapp.openai_api.errors import ApiError, invalid
from chatapp.openai_api.sampling import sampling_check
from chatapp.openai_api.schemas import NEUTRAL, ChatCompletionRequest


def chat_request_parse(body: bytes) -> ChatCompletionRequest:
    try:
        raw = json.loads(body)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise invalid(
            "We could not parse the JSON body of your request. Send a JSON object.",
            code="invalid_json",
        ) from exc
    if not isinstance(raw, dict):
        raise invalid("The request body must be a JSON object.", code="invalid_json")
    try:  # JSON escapes can smuggle in lone surrogates ("\ud800"): no text may hold them
        json.dumps(raw, ensure_ascii=False).encode()
    except UnicodeEncodeError as exc:
        raise invalid("The request holds invalid Unicode (a lone surrogate).") from exc
    try:
        request = ChatCompletionRequest.model_validate_json(body)
    except ValidationError as exc:
        raise _described(exc) from exc
    for name, neutral in NEUTRAL.items():
        value = getattr(request, name)
        if any(type(value) is type(ok) and value == ok for ok in neutral):
            continue
        if name == "n":
            raise invalid("Only n=1 is supported: one choice per request.", param="n")
        raise invalid(
            f"'{name}' is not supported by this server; leave it out.",
            param=name,
            code="unsupported_parameter",
        )
    sampling_check(request)
    return request


def _described(exc: ValidationError) -> ApiError:
    first = exc.errors()[0]
    param = _param(first["loc"])
    if first["type"] == "extra_forbidden":
        return invalid(
            f"Unrecognized request argument supplied: {param}",
            param=param,
            code="unknown_parameter",
        )
    if first["type"] == "missing":
        return invalid(f"Missing required parameter: '{param}'.", param=param)
    return invalid(f"Invalid value for '{param}': {first['msg']}.", param=param)


_UNION_BRANCHES = {"str", "int", "float", "bool"}


def _param(loc: tuple[int | str, ...]) -> str:
    """pydantic's location as OpenAI writes it: messages[0].role."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in _UNION_BRANCHES or "[" in part:
            continue  # pydantic names the union branch it tried: not a parameter
        else:
            out += f".{part}" if out else str(part)
    return out or "body"
