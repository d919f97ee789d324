"""The one error callers catch: the model folder is missing, half-written or damaged."""

from __future__ import annotations

from pathlib import Path

from inference.models.paths import prepare_command


class ModelNotReadyError(RuntimeError):
    """Raised instead of letting vLLM fail later with an obscure loading error."""

    def __init__(self, *, model_dir: Path, reason: str) -> None:
        self.model_dir = model_dir
        self.reason = reason
        super().__init__(
            f"Model folder {model_dir} is not ready: {reason}. "
            f"Run `{prepare_command(model_dir=model_dir)}` to (re)build it."
        )
