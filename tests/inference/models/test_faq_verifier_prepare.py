"""The verifier folder is used only when trained on the repository's current inputs; a trained
one is reused from CHAT_MODEL_CACHE instead of training again; the worker says what to run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inference.faq.verifier import METADATA
from inference.models import verifier_check
from inference.models.errors import ModelNotReadyError
from inference.models.paths import faq_verifier_dir
from inference.models.readiness import write_marker
from inference.models.verifier_check import ensure_verifier_ready, pinned_training_inputs
from inference.runtime import build_faq_cache, build_faq_decider
from modelprep.faq_verifier import prepare_faq_verifier, training_source
from tests.inference.faq.test_deciders import info
from tests.support.workers import worker_settings


def trained_folder(folder: Path, *, source: dict[str, str]) -> Path:
    """A folder laid out like a trained one (no weights: nothing here loads them)."""
    folder.mkdir(parents=True)
    info().write(folder)
    (folder / "head.safetensors").write_bytes(b"weights")
    write_marker(model_dir=folder, model="faq-verifier", source=source)
    return folder


def test_a_folder_trained_on_the_current_inputs_is_ready(tmp_path: Path) -> None:
    ensure_verifier_ready(model_dir=trained_folder(tmp_path / "v", source=training_source()))


def test_a_folder_trained_on_other_labelled_pairs_is_refused_with_the_command(
    tmp_path: Path,
) -> None:
    source = {**training_source(), "labelled_pairs_sha256": "0" * 64}
    folder = trained_folder(tmp_path / "models" / "faq-verifier", source=source)
    with pytest.raises(ModelNotReadyError, match="labelled_pairs_sha256 changed") as caught:
        ensure_verifier_ready(model_dir=folder)
    assert "prepare --model faq-verifier" in str(caught.value)


def test_the_worker_wants_a_verifier_trained_on_the_current_inputs() -> None:
    """The worker's check reads the inputs pinned next to it, not the training code: after a
    change to the labelled data, the recipe or the base model, pin them again."""
    assert pinned_training_inputs() == training_source(), (
        "the FAQ verifier's training inputs changed: run `python -m modelprep pin`"
    )


def test_prepare_refuses_to_train_what_the_worker_would_refuse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from modelprep import faq_verifier

    stale = tmp_path / "faq_verifier_inputs.json"
    stale.write_text(json.dumps({**training_source(), "recipe": "0"}), encoding="utf-8")
    monkeypatch.setattr(verifier_check, "PINNED_INPUTS_PATH", stale)
    monkeypatch.setattr(faq_verifier, "train_verifier", lambda **_: pytest.fail("trained"))
    with pytest.raises(ModelNotReadyError, match=r"recipe\) since they were pinned") as caught:
        prepare_faq_verifier(data_dir=tmp_path / "data", progress=lambda _: None)
    assert "python -m modelprep pin" in str(caught.value)
    assert not faq_verifier_dir(data_dir=tmp_path / "data").exists()

    assert faq_verifier.training_inputs_pin() == stale  # what `python -m modelprep pin` does
    assert pinned_training_inputs() == training_source()
    assert faq_verifier.training_inputs_stale() == []


def test_a_changed_file_is_refused(tmp_path: Path) -> None:
    folder = trained_folder(tmp_path / "v", source=training_source())
    (folder / METADATA).write_text("{}", encoding="utf-8")
    with pytest.raises(ModelNotReadyError, match=f"{METADATA} is missing or changed"):
        ensure_verifier_ready(model_dir=folder)


@pytest.fixture
def cached_verifier(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A trained-looking verifier for the current inputs in CHAT_MODEL_CACHE (under tmp_path)."""
    monkeypatch.setenv("CHAT_MODEL_CACHE", str(tmp_path / "cache"))
    from modelprep import faq_verifier

    cached = faq_verifier._cached_folder(training_source())
    assert cached is not None
    return trained_folder(cached, source=training_source())


def test_a_verifier_trained_on_the_same_inputs_is_copied_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cached_verifier: Path
) -> None:
    from modelprep import faq_verifier

    def no_training(**_: object) -> None:
        raise AssertionError("trained although the cache holds a verifier for these inputs")

    monkeypatch.setattr(faq_verifier, "train_verifier", no_training)
    said: list[str] = []
    target = prepare_faq_verifier(data_dir=tmp_path / "data", progress=said.append)
    assert target == faq_verifier_dir(data_dir=tmp_path / "data")
    ensure_verifier_ready(model_dir=target)
    assert any("copied the verifier" in line for line in said)


def test_a_damaged_cached_verifier_is_not_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cached_verifier: Path
) -> None:
    from modelprep import faq_verifier

    (cached_verifier / "head.safetensors").write_bytes(b"WEIGHTS")  # same size, other bytes
    trained: list[Path] = []

    def fake_training(*, out_dir: Path, **_: object) -> None:
        trained.append(out_dir)
        info().write(out_dir)
        (out_dir / "head.safetensors").write_bytes(b"weights")

    monkeypatch.setattr(faq_verifier, "train_verifier", fake_training)
    prepare_faq_verifier(data_dir=tmp_path / "data", progress=lambda _: None)
    assert len(trained) == 1


def test_without_a_prepared_verifier_no_decider_loads_and_the_command_is_named(
    tmp_path: Path,
) -> None:
    settings = worker_settings(faq=True, faq_verifier_dir=tmp_path / "models" / "faq-verifier")
    with pytest.raises(ModelNotReadyError, match="prepare --model faq-verifier"):
        build_faq_decider(settings=settings, progress=lambda _: None)


def test_a_worker_without_a_prepared_verifier_starts_on_exact_repeats(tmp_path: Path) -> None:
    settings = worker_settings(faq=True, faq_verifier_dir=tmp_path / "models" / "faq-verifier")
    cache = build_faq_cache(settings=settings, progress=lambda _: None)
    assert cache is not None
    assert cache.decider.name == "exact"  # the worker starts; the verifier comes later
    assert cache.until_ready is not None


# A seeded matrix product and softmax computed in the training child's environment, as bytes'
# sha256: MKL's COMPATIBLE branch gives the same bytes on every x86-64 CPU (Intel documents it as
# the one branch that does on non-Intel CPUs). Pinned on an Intel Xeon; its AVX2 branch gave
# 5cf43acec3cf459e there, and on an AMD CPU it falls back to the CPU's own kernels.
SAME_ON_EVERY_CPU = "2d3389d82fd620e9"
ARITHMETIC_PROBE = """
import hashlib, torch
torch.manual_seed(0)
a, w = torch.randn(96, 768), torch.randn(768, 192)
out = torch.nn.functional.gelu(a @ w).softmax(-1)
digest = hashlib.sha256(out.numpy().tobytes()).hexdigest()[:16]
print(torch.backends.cpu.get_cpu_capability(), digest)
"""


def test_the_training_child_computes_the_same_bytes_on_every_cpu() -> None:
    """Trained with each CPU's own kernels, the shipped verifier swung with the CPU (recipe 11:
    2 held-out questions answered with another entry's answer when trained on an AMD EPYC, 10 on
    an Intel Xeon): the child process training runs in starts with `REPRODUCIBLE_CPU_ENV`, and
    its arithmetic is the pinned one. A failure here means this CPU trains another verifier
    than the one docs/faq.md measured."""
    import os
    import subprocess
    import sys

    from modelprep.faq_verifier import REPRODUCIBLE_CPU_ENV, training_source

    env = {**os.environ, **REPRODUCIBLE_CPU_ENV}
    ran = subprocess.run(
        [sys.executable, "-c", ARITHMETIC_PROBE],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert ran.stdout.split() == ["AVX2", SAME_ON_EVERY_CPU]
    assert json.loads(training_source()["cpu_numerics"]) == REPRODUCIBLE_CPU_ENV
