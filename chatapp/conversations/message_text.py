"""What a message's text may be: the one check both edges (the socket and `/v1`) run on what a
user sends before anything is queued or stored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class TextRefusal:
    code: Literal["too_large", "invalid"]
    message: str


def text_refusal(text: str, *, max_chars: int) -> TextRefusal | None:
    """Why `text` cannot be a message of at most `max_chars`, or None. NUL: PostgreSQL's text
    cannot hold it, so it would fail only once the turn is stored, after the answer started."""
    if len(text) > max_chars:
        return TextRefusal(
            code="too_large", message=f"Messages are limited to {max_chars} characters."
        )
    if "\x00" in text:
        return TextRefusal(
            code="invalid", message="Messages cannot contain NUL (U+0000) characters."
        )
    return None
