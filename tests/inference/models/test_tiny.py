"""The tiny test model: built once, deterministic, loadable, rebuilt only when damaged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inference.models import MARKER_FILENAME, ModelNotReadyError, ensure_model_ready
from modelprep import tiny
from modelprep.__main__ import main
from modelprep.tiny import build_tiny_model

# vLLM's CPU attention backend kernels (vllm/v1/attention/backends/cpu_attn.py)
CPU_HEAD_SIZES = {32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512}


def test_second_build_is_a_no_op(tiny_data_dir: Path, tiny_dir: Path) -> None:
    marker_mtime = (tiny_dir / MARKER_FILENAME).stat().st_mtime_ns
    lines: list[str] = []
    assert build_tiny_model(data_dir=tiny_data_dir, progress=lines.append) == tiny_dir
    assert (tiny_dir / MARKER_FILENAME).stat().st_mtime_ns == marker_mtime
    assert lines == [f"[tiny] already prepared at {tiny_dir}"]


def test_build_is_deterministic(tiny_dir: Path, tmp_path: Path) -> None:
    other = build_tiny_model(data_dir=tmp_path, progress=lambda _line: None)
    first = json.loads((tiny_dir / MARKER_FILENAME).read_text())["files"]
    second = json.loads((other / MARKER_FILENAME).read_text())["files"]
    assert first == second


def test_damaged_folder_is_rebuilt(tiny_copy: Path) -> None:
    (tiny_copy / "model.safetensors").write_bytes(b"garbage")
    lines: list[str] = []
    rebuilt = build_tiny_model(data_dir=tiny_copy.parent.parent, progress=lines.append)
    assert rebuilt == tiny_copy
    ensure_model_ready(model_dir=rebuilt)
    assert any("ready at" in line for line in lines)


def test_failed_build_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(**_kwargs: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(tiny, "_save_model", explode)
    with pytest.raises(RuntimeError, match="disk full"):
        build_tiny_model(data_dir=tmp_path, progress=lambda _line: None)
    models = tmp_path / "models"
    assert [p.name for p in models.iterdir() if not p.name.endswith(".lock")] == []
    with pytest.raises(ModelNotReadyError):
        ensure_model_ready(model_dir=models / "tiny-llama")


def test_tiny_model_fits_vllm_cpu(tiny_dir: Path) -> None:
    config = json.loads((tiny_dir / "config.json").read_text())
    assert config["head_dim"] in CPU_HEAD_SIZES
    assert config["max_position_embeddings"] >= 4096
    assert config["model_type"] == "llama"
    assert not (tiny_dir / "chat_format.json").exists()  # the chat template is the one path


def test_tokenizer_adds_exactly_one_bos(tiny_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_dir), local_files_only=True)
    ids = tokenizer("Where is my parcel? 😀").input_ids
    assert ids[0] == tokenizer.bos_token_id
    assert ids.count(tokenizer.bos_token_id) == 1
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.decode(ids, skip_special_tokens=True) == "Where is my parcel? 😀"


def test_cli_prepares_then_reports_ready(
    tiny_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tiny_copy.parent.parent
    assert main(["prepare", "--model", "tiny", "--data-dir", str(data_dir), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "[tiny] already prepared" in out
    assert "sha256 verified" in out
