"""Warnings for template content that would break prefix-cache sharing.

The system prompt is the shared prefix: if it differs between users by a single byte (a date,
a time, a name, a variable), vLLM cannot reuse its cached KV blocks and every first token pays
for the whole prompt again.
"""

from __future__ import annotations

import re

from chatapp.prompts.rendering import placeholders

_VOLATILE = [
    (re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), "a date"),
    (re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b"), "a date"),
    (re.compile(r"\b\d{1,2}:\d{2}(:\d{2})?\b"), "a time of day"),
    (
        re.compile(r"\b(today|tomorrow|yesterday|right now|current (date|time))\b", re.I),
        "a reference to the current date or time",
    ),
    (
        re.compile(r"\{[a-zA-Z_ ]*(date|time|now|user|name)[a-zA-Z_ ]*\}", re.I),
        "a date, time or user placeholder",
    ),
]


def lint_template(*, system_prompt: str, body: str, declared: set[str]) -> list[str]:
    warnings: list[str] = []
    for name in dict.fromkeys(placeholders(system_prompt)):
        warnings.append(
            f"The system prompt contains the variable {{{{{name}}}}}: variables belong in the "
            "message body, or every user gets a different prefix."
        )
    seen: set[str] = set()
    for pattern, what in _VOLATILE:
        for match in pattern.finditer(system_prompt):
            if match.group(0) in seen:
                continue
            seen.add(match.group(0))
            warnings.append(
                f"The system prompt contains {what} ({match.group(0)!r}): volatile content in "
                "the shared prefix defeats the prefix cache. Put it in the message body."
            )
    for name in dict.fromkeys(placeholders(body)):
        if name not in declared:
            warnings.append(f"The body uses {{{{{name}}}}}, which is not a declared variable.")
    return warnings
