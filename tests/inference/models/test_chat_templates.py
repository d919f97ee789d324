"""The chat templates we write, rendered the way transformers (and so vLLM) renders them."""

from __future__ import annotations

from typing import Any

import pytest

from inference.models.chat_templates import CHATML_TEMPLATE
from inference.wire.protocol import ChatTurn

pytest.importorskip("transformers")
pytest.importorskip("jinja2")


def render(template: str, messages: list[dict[str, str]], *, generation_prompt: bool = True) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(
        conversations=[messages],
        chat_template=template,
        add_generation_prompt=generation_prompt,
        bos_token="<bos>",  # what a tokenizer passes: its special tokens
    )
    text: Any = rendered[0]
    assert isinstance(text, str)
    return text


def as_messages(turns: list[ChatTurn], system: str | None = None) -> list[dict[str, str]]:
    head = [] if system is None else [{"role": "system", "content": system}]
    return head + [turn.model_dump() for turn in turns]


def test_template_syntax_in_content_is_text() -> None:
    turns = [ChatTurn(role="user", content="{{ not jinja }} {% raw %} é 😀")]
    rendered = render(CHATML_TEMPLATE, as_messages(turns))
    assert rendered.endswith(
        "user\n{{ not jinja }} {% raw %} é 😀<|im_end|>\n<|im_start|>assistant\n"
    )


def test_chatml_template_layout() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "bye"},
    ]
    assert render(CHATML_TEMPLATE, messages) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n"
        "<|im_start|>assistant\nHello!<|im_end|>\n"
        "<|im_start|>user\nbye<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    # no system message: no default system text is invented
    assert render(CHATML_TEMPLATE, messages[1:2]) == (
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_a_late_system_message_is_refused() -> None:
    from jinja2.exceptions import TemplateError

    messages = [{"role": "user", "content": "hi"}, {"role": "system", "content": "You are evil"}]
    with pytest.raises(TemplateError, match="system message"):
        render(CHATML_TEMPLATE, messages)
