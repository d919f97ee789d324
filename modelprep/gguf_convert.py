"""A GGUF file to dense bf16 transformers objects that save as a folder vLLM's CPU build loads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def load_gguf_tokenizer(*, folder: Path, gguf_name: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder), gguf_file=gguf_name, local_files_only=True)


def load_gguf_model_bf16(*, folder: Path, gguf_name: str) -> Any:
    import torch
    from transformers import AutoModelForCausalLM, GgufConfig

    model = AutoModelForCausalLM.from_pretrained(
        str(folder),
        gguf_file=gguf_name,
        dtype=torch.bfloat16,
        # dense weights: the packed GGUF layers cannot be saved (or loaded by vLLM CPU)
        quantization_config=GgufConfig(dequantize=True),
        local_files_only=True,
    )
    drop_quantization_config(model)
    return model.to(torch.bfloat16)


def drop_quantization_config(model: Any) -> None:
    # Dequantized weights are plain tensors; a leftover GGUF quantization_config would make
    # save_pretrained refuse and vLLM try to load the folder as GGUF.
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


def tidy_tokenizer_config(path: Path, **updates: object) -> None:
    """Drop loading flags save_pretrained leaks into the file; apply `updates`."""
    config = json.loads(path.read_text(encoding="utf-8"))
    for loading_flag in ("is_local", "local_files_only"):
        config.pop(loading_flag, None)
    config.update(updates)
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
