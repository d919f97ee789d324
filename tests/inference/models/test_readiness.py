"""A model folder is used only when complete: clear errors for every kind of damage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inference.models import (
    MARKER_FILENAME,
    ModelNotReadyError,
    ensure_model_ready,
    smollm2_model_dir,
    verify_model,
)


def test_fresh_folder_is_ready_and_verifies(tiny_dir: Path) -> None:
    ensure_model_ready(model_dir=tiny_dir)
    verify_model(model_dir=tiny_dir)


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(ModelNotReadyError, match="does not exist"):
        ensure_model_ready(model_dir=tmp_path / "nope")


def test_missing_marker_means_half_written(tiny_copy: Path) -> None:
    (tiny_copy / MARKER_FILENAME).unlink()
    with pytest.raises(ModelNotReadyError, match=r"prepared\.json is missing"):
        ensure_model_ready(model_dir=tiny_copy)


def test_corrupt_marker(tiny_copy: Path) -> None:
    (tiny_copy / MARKER_FILENAME).write_text('{"format_version": 1')
    with pytest.raises(ModelNotReadyError, match=r"prepared\.json is unreadable"):
        ensure_model_ready(model_dir=tiny_copy)


def test_old_format_version(tiny_copy: Path) -> None:
    marker = json.loads((tiny_copy / MARKER_FILENAME).read_text())
    marker["format_version"] = 0
    (tiny_copy / MARKER_FILENAME).write_text(json.dumps(marker))
    with pytest.raises(ModelNotReadyError, match="format 0"):
        ensure_model_ready(model_dir=tiny_copy)


def test_truncated_weights(tiny_copy: Path) -> None:
    weights = tiny_copy / "model.safetensors"
    size = weights.stat().st_size
    with weights.open("r+b") as handle:
        handle.truncate(size // 2)
    with pytest.raises(
        ModelNotReadyError, match=r"model\.safetensors has \d+ bytes, expected \d+ \(truncated"
    ):
        ensure_model_ready(model_dir=tiny_copy)


def test_missing_weights(tiny_copy: Path) -> None:
    (tiny_copy / "model.safetensors").unlink()
    with pytest.raises(ModelNotReadyError, match=r"model\.safetensors is missing"):
        ensure_model_ready(model_dir=tiny_copy)


def test_same_size_change_is_caught_by_verify_only(tiny_copy: Path) -> None:
    weights = tiny_copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    ensure_model_ready(model_dir=tiny_copy)  # cheap check: sizes only
    with pytest.raises(ModelNotReadyError, match="sha256"):
        verify_model(model_dir=tiny_copy)


def test_unreadable_config(tiny_copy: Path) -> None:
    config = tiny_copy / "config.json"
    size = config.stat().st_size
    config.write_text("x" * size)  # same size, not JSON
    with pytest.raises(ModelNotReadyError, match=r"config\.json is unreadable"):
        ensure_model_ready(model_dir=tiny_copy)


def test_error_names_the_command_to_run(tmp_path: Path) -> None:
    model_dir = smollm2_model_dir(data_dir=tmp_path / "elsewhere")
    with pytest.raises(ModelNotReadyError) as caught:
        ensure_model_ready(model_dir=model_dir)
    message = str(caught.value)
    assert "python -m modelprep prepare --model smollm2" in message
    assert f"--data-dir {tmp_path / 'elsewhere'}" in message
    assert caught.value.model_dir == model_dir
