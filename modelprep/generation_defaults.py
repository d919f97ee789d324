"""`generation_config.json`: the sampling defaults and stop rules a model folder ships with.

vLLM reads temperature, top_p, top_k, min_p, repetition_penalty and max_new_tokens from it as
request defaults (it ignores `do_sample`); transformers reads all of it, `stop_strings` too.
Written through `GenerationConfig` so that transformers' own strict validation runs at
prepare time instead of as a warning at every load.
"""

from __future__ import annotations

from pathlib import Path

GENERATION_CONFIG_FILENAME = "generation_config.json"


def write_generation_config(*, model_dir: Path, **fields: object) -> Path:
    """Replace the folder's generation config (save_pretrained writes one from the model's)."""
    from transformers import GenerationConfig

    GenerationConfig(**fields).save_pretrained(str(model_dir))
    return model_dir / GENERATION_CONFIG_FILENAME
