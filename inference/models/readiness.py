"""The `prepared.json` marker: written last, it is what makes a model folder "ready".

It lists every file of the folder with its size and sha256. Loading checks sizes only (cheap
enough for every start: a truncated or replaced weights file changes size); `verify_model`
re-hashes everything when asked (`--verify`). A folder without a valid marker is never used.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from inference.models.errors import ModelNotReadyError

MARKER_FILENAME = "prepared.json"
# Bump when the folder layout or the preparation changes, so old folders get rebuilt.
# 2: every folder carries a chat template and a generation_config.json with chat defaults.
# 3: no chat_format.json; Gemma's template starts with BOS (the chat path adds no BOS itself).
FORMAT_VERSION = 3
_WEIGHT_SUFFIXES = (".safetensors", ".bin")


class FileRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    size: int
    sha256: str


class PreparedMarker(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int
    model: str
    prepared_at: str
    source: dict[str, str]
    files: dict[str, FileRecord]


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(4 * 1024 * 1024):
            digest.update(block)
    return digest.hexdigest()


def write_marker(*, model_dir: Path, model: str, source: dict[str, str]) -> PreparedMarker:
    """Record every file of `model_dir`; call it as the very last step of a build."""
    files = {
        path.name: FileRecord(size=path.stat().st_size, sha256=sha256_file(path))
        for path in sorted(model_dir.iterdir())
        if path.is_file() and path.name != MARKER_FILENAME
    }
    marker = PreparedMarker(
        format_version=FORMAT_VERSION,
        model=model,
        prepared_at=datetime.now(UTC).isoformat(timespec="seconds"),
        source=source,
        files=files,
    )
    tmp = model_dir / f".{MARKER_FILENAME}.tmp"
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write(marker.model_dump_json(indent=2) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(model_dir / MARKER_FILENAME)
    return marker


def read_marker(*, model_dir: Path) -> PreparedMarker:
    if not model_dir.is_dir():
        raise ModelNotReadyError(model_dir=model_dir, reason="the folder does not exist")
    path = model_dir / MARKER_FILENAME
    try:
        marker = PreparedMarker.model_validate_json(path.read_bytes())
    except FileNotFoundError as exc:
        raise ModelNotReadyError(
            model_dir=model_dir, reason=f"{MARKER_FILENAME} is missing (preparation never finished)"
        ) from exc
    except (OSError, ValidationError) as exc:
        raise ModelNotReadyError(
            model_dir=model_dir, reason=f"{MARKER_FILENAME} is unreadable ({exc})"
        ) from exc
    if marker.format_version != FORMAT_VERSION:
        raise ModelNotReadyError(
            model_dir=model_dir,
            reason=f"it was prepared with format {marker.format_version}, "
            f"this code needs format {FORMAT_VERSION}",
        )
    return marker


def ensure_model_ready(*, model_dir: Path) -> None:
    """Cheap checks (no hashing) that vLLM will find a complete, unmodified folder."""
    marker = read_marker(model_dir=model_dir)
    if not any(name.endswith(_WEIGHT_SUFFIXES) for name in marker.files):
        raise ModelNotReadyError(model_dir=model_dir, reason="the marker lists no weights file")
    for name, record in marker.files.items():
        try:
            size = (model_dir / name).stat().st_size
        except FileNotFoundError as exc:
            raise ModelNotReadyError(model_dir=model_dir, reason=f"{name} is missing") from exc
        if size != record.size:
            raise ModelNotReadyError(
                model_dir=model_dir,
                reason=f"{name} has {size} bytes, expected {record.size} (truncated or replaced)",
            )
    _check_config(model_dir=model_dir)
    _check_prompt_rendering(model_dir=model_dir)


def verify_model(*, model_dir: Path) -> None:
    """`ensure_model_ready` plus a sha256 of every file (reads the whole folder)."""
    ensure_model_ready(model_dir=model_dir)
    marker = read_marker(model_dir=model_dir)
    for name, record in marker.files.items():
        if sha256_file(model_dir / name) != record.sha256:
            raise ModelNotReadyError(
                model_dir=model_dir, reason=f"{name} does not match its recorded sha256"
            )


def _check_config(*, model_dir: Path) -> None:
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelNotReadyError(
            model_dir=model_dir, reason=f"config.json is unreadable ({exc})"
        ) from exc
    if not isinstance(config, dict) or "model_type" not in config:
        raise ModelNotReadyError(model_dir=model_dir, reason="config.json is not a model config")


def _check_prompt_rendering(*, model_dir: Path) -> None:
    # Every prompt is rendered with the folder's chat template (inference/chat_prompt.py).
    if not has_chat_template(model_dir=model_dir):
        raise ModelNotReadyError(
            model_dir=model_dir,
            reason="it has no chat template (chat_template.jinja or tokenizer_config.json)",
        )


def has_chat_template(*, model_dir: Path) -> bool:
    """Where transformers looks: `chat_template.jinja`, else `tokenizer_config.json`."""
    template = model_dir / "chat_template.jinja"
    if template.is_file() and template.stat().st_size > 0:
        return True
    try:
        config = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and bool(config.get("chat_template"))
