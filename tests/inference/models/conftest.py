"""One tiny model per test session (a few seconds); tests that damage it work on copies."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from inference.models import build_tiny_model


@pytest.fixture(scope="session")
def tiny_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # building needs the model extras (torch, transformers), which a web-only install lacks
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    data_dir = tmp_path_factory.mktemp("data")
    build_tiny_model(data_dir=data_dir, progress=lambda _line: None)
    return data_dir


@pytest.fixture(scope="session")
def tiny_dir(tiny_data_dir: Path) -> Path:
    return tiny_data_dir / "models" / "tiny-llama"


@pytest.fixture
def tiny_copy(tiny_dir: Path, tmp_path: Path) -> Path:
    """A private copy laid out as `<data_dir>/models/tiny-llama`, free to corrupt."""
    target = tmp_path / "data" / "models" / "tiny-llama"
    shutil.copytree(tiny_dir, target)
    return target
