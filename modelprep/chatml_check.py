"""The last build step of a ChatML model: does the written folder reload as one?"""

from __future__ import annotations

from pathlib import Path

from inference.models.chat_templates import CHATML_END, CHATML_START


def check_chatml_folder(folder: Path) -> None:
    """Fail the build unless the folder reloads as a ChatML chat model vLLM can serve."""
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    if getattr(config, "quantization_config", None) is not None:
        raise RuntimeError("the converted config still carries a quantization_config")
    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    if not tokenizer.chat_template:
        raise RuntimeError(f"the saved tokenizer in {folder} lost its chat template")
    specials = set(tokenizer.all_special_tokens)
    for token in (CHATML_START, CHATML_END):
        ids = tokenizer.encode(token, add_special_tokens=False)
        if token not in specials or len(ids) != 1:
            raise RuntimeError(f"{token} must be one special token, got ids {ids}")
    if tokenizer.eos_token != CHATML_END:
        raise RuntimeError(f"eos must be {CHATML_END} for chat, got {tokenizer.eos_token!r}")
    rendered = tokenizer.apply_chat_template(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    expected = f"{CHATML_START}system\nS{CHATML_END}\n{CHATML_START}user\nU{CHATML_END}\n"
    if rendered != expected + f"{CHATML_START}assistant\n":
        raise RuntimeError(f"the chat template does not render ChatML: {rendered!r}")
    eos_ids = GenerationConfig.from_pretrained(str(folder)).eos_token_id
    if tokenizer.eos_token_id not in (eos_ids if isinstance(eos_ids, list) else [eos_ids]):
        raise RuntimeError(f"generation_config.json eos_token_id {eos_ids} lacks {CHATML_END}")
