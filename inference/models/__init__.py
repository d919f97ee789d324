"""Model preparation: turn what ships with the project into folders vLLM can load.

`python -m inference.models prepare` builds them once under `<data_dir>/models/`; the worker
calls `ensure_model_ready` before starting vLLM and gets one clear error if a folder is
missing, half-written or damaged. Heavy libraries (torch, transformers) are imported only
inside the build functions, so importing this package stays cheap.
"""

from inference.models.errors import ModelNotReadyError
from inference.models.paths import (
    default_data_dir,
    smollm2_model_dir,
    tiny_model_dir,
)
from inference.models.readiness import MARKER_FILENAME, ensure_model_ready, verify_model
from inference.models.smollm2 import prepare_smollm2
from inference.models.tiny import build_tiny_model

__all__ = [
    "MARKER_FILENAME",
    "ModelNotReadyError",
    "build_tiny_model",
    "default_data_dir",
    "ensure_model_ready",
    "prepare_smollm2",
    "smollm2_model_dir",
    "tiny_model_dir",
    "verify_model",
]
