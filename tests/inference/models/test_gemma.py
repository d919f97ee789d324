"""The converted Gemma folder, when this machine has prepared it (conversion takes ~45 s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference.models import (
    GEMMA_LAYOUT,
    ModelNotReadyError,
    default_data_dir,
    ensure_model_ready,
    gemma_model_dir,
    prepare_gemma,
)
from inference.protocol import ChatTurn

GEMMA_DIR = gemma_model_dir(data_dir=default_data_dir())


def _gemma_ready() -> bool:
    try:
        ensure_model_ready(model_dir=GEMMA_DIR)
    except ModelNotReadyError:
        return False
    return True


pytestmark = pytest.mark.skipif(
    not _gemma_ready(),
    reason="run `python -m inference.models prepare --model gemma` to convert Gemma first",
)


def test_prepared_gemma_is_ready_and_prepare_is_a_no_op() -> None:
    ensure_model_ready(model_dir=GEMMA_DIR)
    lines: list[str] = []
    assert prepare_gemma(data_dir=default_data_dir(), progress=lines.append) == GEMMA_DIR
    assert lines == [f"[gemma] already prepared at {GEMMA_DIR}"]


def test_gemma_prompts_start_with_exactly_one_bos() -> None:
    from transformers import AutoTokenizer

    from inference.chat_prompt import ChatTemplate, special_token_ids, token_ids

    tokenizer = AutoTokenizer.from_pretrained(str(GEMMA_DIR), local_files_only=True)
    template = ChatTemplate.of_tokenizer(tokenizer)
    rendered = template.render(system=None, messages=[ChatTurn(role="user", content="hi <bos>")])
    ids = token_ids(tokenizer, rendered, specials=special_token_ids(tokenizer))
    assert ids[0] == tokenizer.bos_token_id == 2
    assert ids.count(tokenizer.bos_token_id) == 1  # the typed "<bos>" stays text


def test_gemma_weights_are_plain_bf16(tmp_path: Path) -> None:
    from safetensors import safe_open

    with safe_open(str(GEMMA_DIR / "model.safetensors"), framework="pt") as handle:
        keys = list(handle.keys())
        dtypes = {str(handle.get_slice(key).get_dtype()) for key in keys}
    assert dtypes == {"BF16"}
    assert any(key.endswith("embed_tokens.weight") for key in keys)


def test_gemma_chat_template_renders_the_few_shot_prompt() -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(GEMMA_DIR), local_files_only=True)
    turns = [
        ChatTurn(role="user", content="Where is my parcel?"),
        ChatTurn(role="assistant", content="Which order is it?"),
        ChatTurn(role="user", content="Order 55123"),
    ]
    for system in (None, "You are the ShopCo assistant."):
        messages = [] if system is None else [{"role": "system", "content": system}]
        messages += [turn.model_dump() for turn in turns]
        rendered = tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        assert rendered.startswith("<bos>" + (system or GEMMA_LAYOUT.system.strip()))
        assert rendered.endswith("Customer: Order 55123\nAgent:")


def test_gemma_generation_config_carries_the_stop_strings() -> None:
    import json

    config = json.loads((GEMMA_DIR / "generation_config.json").read_text(encoding="utf-8"))
    assert config["stop_strings"] == GEMMA_LAYOUT.stop
    assert config["max_new_tokens"] == GEMMA_LAYOUT.default_max_tokens
    assert config["do_sample"] is False
