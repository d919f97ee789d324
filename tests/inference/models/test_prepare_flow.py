"""The shared prepare flow, with a stand-in build that writes a minimal folder in no time."""

from __future__ import annotations

from pathlib import Path

from inference.models.readiness import ensure_model_ready, write_marker
from modelprep.prepare_flow import prepare_folder
from modelprep.progress import Steps


def fake_build(staging: Path, scratch: Path, steps: Steps) -> None:
    assert scratch.is_dir()
    (staging / "config.json").write_text('{"model_type": "llama"}')
    (staging / "model.safetensors").write_bytes(b"weights")
    (staging / "chat_template.jinja").write_text("{{ messages[0]['content'] }}")
    write_marker(model_dir=staging, model="fake", source={})


def test_builds_once_then_is_a_no_op_and_clears_stale_scratch(tmp_path: Path) -> None:
    target = tmp_path / "models" / "fake"
    stale = target.parent / ".fake.scratch-killed"
    stale.mkdir(parents=True)
    lines: list[str] = []
    steps = Steps(label="fake", progress=lines.append)
    assert prepare_folder(target=target, steps=steps, verify=False, build=fake_build) == target
    ensure_model_ready(model_dir=target)
    assert not stale.exists()
    assert [p.name for p in target.parent.iterdir() if p.name.startswith(".fake.")] == [
        ".fake.lock"
    ]
    lines.clear()
    assert prepare_folder(target=target, steps=steps, verify=True, build=fake_build) == target
    assert lines[-1] == f"[fake] already prepared at {target}"
