"""Repository-level promises: the compose file parses; nothing large or generated is tracked."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def test_compose_file_is_valid_yaml_with_the_backing_services() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert {"redis", "postgres"} <= set(compose["services"])
    for service in compose["services"].values():
        assert "image" in service or "build" in service


def test_no_weights_caches_or_virtualenvs_are_tracked() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert not [p for p in tracked if p.startswith(("data/", ".venv/", "node_modules/"))]
    assert not [p for p in tracked if p.endswith((".safetensors", ".gguf", ".bin", ".sqlite3"))]
