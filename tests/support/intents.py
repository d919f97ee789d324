"""Handoff's two word questions, loaded in the test process (`intents_loaded`): trained into
the data dir once per data file (as the web process's child would), then read."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings

from chatapp.handoff import intents, intents_training


def intents_dir() -> Path:
    """The data dir's trained models, trained first when missing."""
    directory = Path(settings.DATA_DIR) / "intents"
    intents_training.train_missing(directory)
    return directory


@pytest.fixture(scope="session")
def intents_loaded() -> None:
    assert intents.load(intents_dir())
