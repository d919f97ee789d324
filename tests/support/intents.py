"""Handoff's two word questions, loaded in the test process (`intents_loaded`): trained into
the data dir once per data file (as the web process's child would), then read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from chatapp.handoff import intents, intents_training
from inference.settings import data_dir_from_env


def intents_dir() -> Path:
    """The data dir's trained models, trained first when missing."""
    directory = data_dir_from_env() / "intents"  # settings.DATA_DIR, without needing Django
    intents_training.train_missing(directory)
    return directory


@pytest.fixture(scope="session")
def intents_loaded() -> None:
    assert intents.load(intents_dir())


def intents_seeded(data_dir: Path) -> None:
    """Put the trained models into an app's fresh data dir, as on a machine that started
    before: each app of the suite would otherwise train them in a child at its start (seconds
    of CPU each; the training child itself is tested in tests/chatapp/handoff)."""
    target = data_dir / "intents"
    target.mkdir(parents=True, exist_ok=True)
    for model in intents_dir().glob("*.json"):
        if not (target / model.name).exists():
            shutil.copy2(model, target / model.name)
