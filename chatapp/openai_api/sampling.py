"""The sampling parameters of a chat completion request, checked like OpenAI checks them and
mapped to what the worker asks vLLM for (`inference.wire.protocol.SamplingOptions`).

Types and ranges are checked by `schemas.ChatCompletionRequest`; here are the shapes a type
cannot say. Each refusal is a 400 naming the parameter.
"""

from __future__ import annotations

import re
from typing import Any

from chatapp.openai_api.errors import invalid
from chatapp.openai_api.schemas import ChatCompletionRequest
from inference.wire.protocol import ResponseFormat

MAX_STOP = 4  # OpenAI's limit
_SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_RESPONSE_FORMATS = ("text", "json_object", "json_schema")
_JSON_SCHEMA_KEYS = {"name", "description", "schema", "strict"}


def sampling_check(request: ChatCompletionRequest) -> None:
    """Raise the 400 for the first badly shaped sampling parameter."""
    stop_of(request)
    response_format_of(request)
    logprobs_of(request)
    logit_bias_of(request)


def stop_of(request: ChatCompletionRequest) -> list[str]:
    """Extra stop strings, on top of the model's own. `""` and `[]` mean none."""
    stop = request.stop
    if stop is None or stop == "":
        return []
    stops = [stop] if isinstance(stop, str) else stop
    if len(stops) > MAX_STOP:
        raise invalid(f"'stop' takes at most {MAX_STOP} sequences, not {len(stops)}.", param="stop")
    for index, value in enumerate(stops):
        if not value:
            raise invalid("Stop sequences must not be empty.", param=f"stop[{index}]")
    return list(dict.fromkeys(stops))


def logprobs_of(request: ChatCompletionRequest) -> int | None:
    """None: no logprobs; N: each token's logprob and its N likeliest alternatives."""
    if request.logprobs is True:
        return request.top_logprobs or 0
    if request.top_logprobs:
        raise invalid("'top_logprobs' needs 'logprobs' set to true.", param="top_logprobs")
    return None


def logit_bias_of(request: ChatCompletionRequest) -> dict[int, float] | None:
    """Token id (the served model's tokenizer) -> bias. Ids outside the vocabulary are
    refused by vLLM, which the worker reports as a 400."""
    if not request.logit_bias:
        return None
    bias: dict[int, float] = {}
    for key, value in request.logit_bias.items():
        if not key.isdecimal() or not key.isascii():
            raise invalid(
                f"Invalid key in 'logit_bias': {key[:40]!r} is not a token id "
                "(a non-negative integer, as a string).",
                param="logit_bias",
            )
        bias[int(key)] = value
    return bias


def response_format_of(request: ChatCompletionRequest) -> ResponseFormat | None:
    """None: free text. `json_object`: any JSON object; `json_schema`: JSON that matches the
    schema. Both are enforced while decoding (vLLM's structured outputs), so `strict` is
    always in effect."""
    value = request.response_format
    if value is None:
        return None
    kind = value.get("type")
    if kind is None:
        raise invalid(
            "Missing required parameter: 'response_format.type'.", param="response_format.type"
        )
    if kind not in _RESPONSE_FORMATS:
        raise invalid(
            f"Invalid value for 'response_format.type': {str(kind)[:40]!r}. Supported values "
            "are: 'text', 'json_object' and 'json_schema'.",
            param="response_format.type",
        )
    allowed = {"type", "json_schema"} if kind == "json_schema" else {"type"}
    _no_unknown(value, allowed, prefix="response_format")
    if kind == "text":
        return None
    if kind == "json_object":
        return ResponseFormat(json_schema=None)
    spec = value.get("json_schema")
    if spec is None:
        raise invalid(
            "Missing required parameter: 'response_format.json_schema'.",
            param="response_format.json_schema",
        )
    if not isinstance(spec, dict):
        raise invalid(
            "'response_format.json_schema' must be an object "
            '({"name": ..., "schema": {...}, "strict": true}).',
            param="response_format.json_schema",
        )
    _no_unknown(spec, _JSON_SCHEMA_KEYS, prefix="response_format.json_schema")
    name = spec.get("name")
    if name is None:
        raise invalid(
            "Missing required parameter: 'response_format.json_schema.name'.",
            param="response_format.json_schema.name",
        )
    if not isinstance(name, str) or not _SCHEMA_NAME.match(name):
        raise invalid(
            "'response_format.json_schema.name' must be 1 to 64 letters, digits, '_' or '-'.",
            param="response_format.json_schema.name",
        )
    for key, kinds, what in (("description", str, "a string"), ("strict", bool, "a boolean")):
        if spec.get(key) is not None and not isinstance(spec[key], kinds):
            raise invalid(
                f"'response_format.json_schema.{key}' must be {what}.",
                param=f"response_format.json_schema.{key}",
            )
    schema = spec.get("schema")
    if schema is not None and not isinstance(schema, dict):
        raise invalid(
            "'response_format.json_schema.schema' must be a JSON Schema object.",
            param="response_format.json_schema.schema",
        )
    return ResponseFormat(json_schema=schema or {})


def _no_unknown(value: dict[str, Any], allowed: set[str], *, prefix: str) -> None:
    for key in value:
        if key not in allowed:
            param = f"{prefix}.{str(key)[:40]}"
            raise invalid(
                f"Unrecognized request argument supplied: {param}",
                param=param,
                code="unknown_parameter",
            )
