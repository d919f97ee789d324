"""Reading one browser frame: size, JSON, Unicode, type and schema, in that order.

Pure: it returns the validated frame or the refusal the browser should get (with the frame's
client id when one could be read), so the consumer only dispatches.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Set
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

from chatapp.realtime.schemas import (
    CLIENT_FRAME_TYPES,
    AnyClientFrame,
    ErrorCode,
    client_frame_adapter,
    client_id_of,
)


@dataclass(frozen=True, slots=True)
class Refusal:
    code: ErrorCode
    message: str
    client_id: uuid.UUID | None = None


F = TypeVar("F")


@dataclass(frozen=True, slots=True)
class Received(Generic[F]):
    frame: F
    size_bytes: int  # as received


def frame_read(text_data: str | None, *, max_bytes: int) -> Received[AnyClientFrame] | Refusal:
    """A chat socket's frame."""
    return frame_of(
        text_data, max_bytes=max_bytes, adapter=client_frame_adapter, types=CLIENT_FRAME_TYPES
    )


def frame_of(
    text_data: str | None, *, max_bytes: int, adapter: TypeAdapter[F], types: Set[str]
) -> Received[F] | Refusal:
    """A frame of one of `types`, validated by `adapter` (the chat's, the agent console's)."""
    if text_data is None:
        return Refusal("invalid", "Send JSON text frames, not binary.")
    size = len(text_data.encode(errors="surrogatepass"))
    if size > max_bytes:
        return Refusal("too_large", f"Frame is larger than {max_bytes} bytes.")
    try:
        raw = json.loads(text_data)
    except (ValueError, RecursionError):
        return Refusal("bad_json", "Frame is not valid JSON.")
    client_id = client_id_of(raw)
    try:  # JSON escapes can smuggle in lone surrogates ("\ud800"): no text may hold them
        json.dumps(raw, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return Refusal("invalid", "Frame text is not valid Unicode (lone surrogate).", client_id)
    kind = raw.get("type") if isinstance(raw, dict) else None
    if not isinstance(kind, str) or kind not in types:
        return Refusal("unknown_type", f"Unknown frame type {str(kind)[:40]!r}.", client_id)
    try:
        frame = adapter.validate_python(raw)
    except ValidationError as exc:
        return Refusal("invalid", _describe(exc), client_id)
    return Received(frame=frame, size_bytes=size)


def _describe(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "frame"
    return f"Invalid {where}: {first['msg']}."[:300]
