"""Whether a FAQ verifier folder is the one this release ships: cheap, for every worker start.

Its `prepared.json` records what it was trained on (`modelprep.faq_verifier.training_source`:
the labelled data's digests, the recipe, the base model). The worker compares that with
`faq_verifier_inputs.json`, the same record pinned next to this module when the training
inputs change (`python -m modelprep pin`; a test fails while the pin is stale), so the worker
knows which verifier it wants without importing the training code or its data.
"""

from __future__ import annotations

import json
from pathlib import Path

from inference.faq.verifier import METADATA
from inference.models.errors import ModelNotReadyError
from inference.models.readiness import read_marker

PINNED_INPUTS_PATH = Path(__file__).resolve().parent / "faq_verifier_inputs.json"


def pinned_training_inputs() -> dict[str, str]:
    """What the shipped verifier is trained on, as `prepared.json` records it."""
    inputs: dict[str, str] = json.loads(PINNED_INPUTS_PATH.read_text(encoding="utf-8"))
    return inputs


def ensure_verifier_ready(*, model_dir: Path) -> None:
    """Cheap checks (sizes, no hashing) that `model_dir` holds a verifier trained on this
    release's inputs; `ModelNotReadyError` says what is wrong."""
    marker = read_marker(model_dir=model_dir)
    if METADATA not in marker.files:
        raise ModelNotReadyError(model_dir=model_dir, reason=f"the marker lists no {METADATA}")
    for name, record in marker.files.items():
        path = model_dir / name
        if not path.is_file() or path.stat().st_size != record.size:
            raise ModelNotReadyError(model_dir=model_dir, reason=f"{name} is missing or changed")
    expected = pinned_training_inputs()
    changed = sorted(key for key in expected if marker.source.get(key) != expected[key])
    if changed:
        raise ModelNotReadyError(
            model_dir=model_dir,
            reason=f"it was trained on other inputs than these ({', '.join(changed)} changed)",
        )
