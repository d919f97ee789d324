"""Prepared model folders as the worker sees them: where they live and whether they are ready.

Building them is offline work (`modelprep`: `python -m modelprep prepare`), which the worker
never imports; it only checks a folder before loading it and gets one clear error, naming the
command to run, when a folder is missing, half-written, damaged or trained on other data.
"""

from inference.models.errors import ModelNotReadyError
from inference.models.paths import default_data_dir, smollm2_model_dir, tiny_model_dir
from inference.models.readiness import MARKER_FILENAME, ensure_model_ready, verify_model
from inference.models.verifier_check import ensure_verifier_ready

__all__ = [
    "MARKER_FILENAME",
    "ModelNotReadyError",
    "default_data_dir",
    "ensure_model_ready",
    "ensure_verifier_ready",
    "smollm2_model_dir",
    "tiny_model_dir",
    "verify_model",
]
