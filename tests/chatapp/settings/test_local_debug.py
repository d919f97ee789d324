"""Django's debug pages (tracebacks, settings) only where nobody else can reach them: the
embedded default of `make run`. The documented multi-process topology (docs/dispatch.md) also
runs on the local settings, with REDIS_URL and DATABASE_URL set, and used to get them too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def debug_with(tmp_path: Path, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "REDIS_URL", "DATABASE_URL"}}
    result = subprocess.run(
        [sys.executable, "-c", "from chatapp.settings import local; print(local.DEBUG)"],
        env={**clean, "CHAT_DATA_DIR": str(tmp_path), **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.strip()


@pytest.mark.parametrize(
    ("env", "debug"),
    [
        ({}, "True"),  # make run: one process on this machine
        ({"REDIS_URL": "redis://127.0.0.1:6379/0"}, "False"),
        ({"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/chat"}, "False"),
        ({"REDIS_URL": "redis://127.0.0.1:6379/0", "DEBUG": "1"}, "True"),  # asked for
        ({"DEBUG": "0"}, "False"),
    ],
)
def test_debug_pages_only_for_the_embedded_default_unless_asked(
    tmp_path: Path, env: dict[str, str], debug: str
) -> None:
    assert debug_with(tmp_path, **env) == debug
