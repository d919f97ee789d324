"""Tests that damage a model work on copies of the session's tiny model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture
def tiny_copy(tiny_dir: Path, tmp_path: Path) -> Path:
    """A private copy laid out as `<data_dir>/models/tiny-llama`, free to corrupt."""
    target = tmp_path / "data" / "models" / "tiny-llama"
    shutil.copytree(tiny_dir, target)
    return target
