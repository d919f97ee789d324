"""Template text rules shared with the browser (frontend/src/templates.ts).

A placeholder is `{{name}}` with name = [a-z_][a-z0-9_]*, no spaces. Rendering replaces every
placeholder of a declared variable with the value's string form and leaves all other text
verbatim, so the browser and the server produce the same bytes for the same values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from chatapp.errors import ApplicationError
from chatapp.prompts.textpatch import sha256_hex as sha256_hex  # one hash for every check

PLACEHOLDER = re.compile(r"\{\{([a-z_][a-z0-9_]*)\}\}")
DEFAULT_MAX_LENGTH = 500
MAX_VARIABLES_BYTES = 8_000


class TemplateError(ApplicationError):
    code = "invalid"


class ValuesTooLarge(ApplicationError):
    code = "too_large"


class Variable(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z_][a-z0-9_]*$", max_length=64)
    label: str = ""
    type: Literal["string", "integer", "choice"] = "string"
    required: bool = True
    max_length: int = Field(default=DEFAULT_MAX_LENGTH, ge=1, le=4000)
    choices: list[str] | None = None

    @model_validator(mode="after")
    def _choices_match_type(self) -> Variable:
        if self.type == "choice" and not self.choices:
            raise ValueError(f"variable {self.name!r} is a choice but lists no choices")
        if self.type != "choice" and self.choices:
            raise ValueError(f"variable {self.name!r} has choices but is not a choice")
        return self


class Sampling(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # None: the model's own default (its generation_config.json)
    max_tokens: int | None = Field(default=None, ge=1, le=8192)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    repetition_penalty: float | None = Field(default=None, gt=0.0, le=2.0)


def parse_variables(raw: Any) -> list[Variable]:
    try:
        variables = [Variable.model_validate(item) for item in raw or []]
    except (ValidationError, TypeError) as exc:
        raise TemplateError(f"Invalid variables: {exc}") from exc
    names = [v.name for v in variables]
    if len(names) != len(set(names)):
        raise TemplateError("Variable names must be unique.")
    return variables


def parse_sampling(raw: Any) -> Sampling:
    try:
        return Sampling.model_validate(raw or {})
    except ValidationError as exc:
        raise TemplateError(f"Invalid sampling parameters: {exc}") from exc


def placeholders(text: str) -> list[str]:
    return PLACEHOLDER.findall(text)


def render_body(body: str, values: Mapping[str, str | int], *, declared: set[str]) -> str:
    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in declared:
            return match.group(0)
        return str(values.get(name, ""))

    return PLACEHOLDER.sub(substitute, body)


def clean_values(variables: list[Variable], raw: Any) -> dict[str, str | int]:
    """Validate a user's variable values against the template's declarations."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise TemplateError("Variables must be an object of name -> value.")
    if len(json.dumps(raw, ensure_ascii=False).encode()) > MAX_VARIABLES_BYTES:
        raise ValuesTooLarge("Variable values are too large.")
    declared = {v.name: v for v in variables}
    unknown = sorted(set(raw) - set(declared))
    if unknown:
        raise TemplateError(f"Unknown variable(s): {', '.join(unknown)}.")
    cleaned: dict[str, str | int] = {}
    for variable in variables:
        value = raw.get(variable.name)
        if value is None or value == "":
            if variable.required:
                raise TemplateError(f"{variable.label or variable.name} is required.")
            cleaned[variable.name] = ""
            continue
        if variable.type == "integer":
            if isinstance(value, bool) or not isinstance(value, int):
                raise TemplateError(f"{variable.label or variable.name} must be a whole number.")
            cleaned[variable.name] = value
            continue
        if not isinstance(value, str):
            raise TemplateError(f"{variable.label or variable.name} must be text.")
        if len(value) > variable.max_length:
            raise ValuesTooLarge(
                f"{variable.label or variable.name} is longer than {variable.max_length} "
                "characters."
            )
        if variable.type == "choice" and value not in (variable.choices or []):
            raise TemplateError(f"{variable.label or variable.name} must be one of the choices.")
        cleaned[variable.name] = value
    return cleaned


def canonical_text(
    *, system_prompt: str, body: str, variables: list[Variable], sampling: Sampling
) -> str:
    """The one serialisation a version's SHA-256 is computed over (sorted keys, no spaces)."""
    return json.dumps(
        {
            "system_prompt": system_prompt,
            "body": body,
            "variables": [v.model_dump() for v in variables],
            "sampling": sampling.model_dump(exclude_none=True),
        },
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
