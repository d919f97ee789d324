"""The shape every converted model's preparation shares: check, lock, build aside, swap in."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from inference.models.errors import ModelNotReadyError
from inference.models.readiness import ensure_model_ready, verify_model
from modelprep.progress import Steps
from modelprep.publish import build_lock, staged_dir

# build(staging, scratch, steps): fill `staging` (published on success); `scratch` is deleted
Build = Callable[[Path, Path, Steps], None]


def prepare_folder(*, target: Path, steps: Steps, verify: bool, build: Build) -> Path:
    """Make `target` ready; a no-op (one "already prepared" line) when it already is.

    With `verify`, an existing folder is also hashed against its marker and rebuilt if it
    does not match.
    """
    if _is_ready(target=target, verify=verify, steps=steps):
        return target
    with build_lock(target=target, progress=steps.say):
        # Another process may have finished the build while we waited for the lock.
        if _is_ready(target=target, verify=verify, steps=steps, quiet=True):
            return target
        steps.say(f"building {target}")
        # a killed build leaves its scratch folder behind (a GGUF of hundreds of MB)
        for stale in target.parent.glob(f".{target.name}.scratch-*"):
            shutil.rmtree(stale, ignore_errors=True)
        with (
            tempfile.TemporaryDirectory(
                prefix=f".{target.name}.scratch-", dir=target.parent
            ) as tmp,
            staged_dir(target=target) as staging,
        ):
            build(staging, Path(tmp), steps)
    steps.say(f"ready at {target} ({steps.elapsed_s():.1f}s in all)")
    return target


def _is_ready(*, target: Path, verify: bool, steps: Steps, quiet: bool = False) -> bool:
    try:
        if verify:
            with steps.step("verifying sha256 of the existing folder"):
                verify_model(model_dir=target)
        else:
            ensure_model_ready(model_dir=target)
    except ModelNotReadyError as exc:
        if target.exists() and not quiet:
            steps.say(f"existing folder will be rebuilt: {exc.reason}")
        return False
    steps.say(f"already prepared at {target}")
    return True
