"""The chat templates we write, rendered the way transformers (and so vLLM) renders them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inference.models.chat_templates import CHATML_TEMPLATE, few_shot_chat_template
from inference.models.gemma import GEMMA_CHAT_TEMPLATE, GEMMA_PROMPT_FORMAT
from inference.models.tiny import TINY_PROMPT_FORMAT
from inference.prompt_format import PromptFormat
from inference.protocol import ChatTurn

pytest.importorskip("transformers")
pytest.importorskip("jinja2")


def render(template: str, messages: list[dict[str, str]], *, generation_prompt: bool = True) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(
        conversations=[messages], chat_template=template, add_generation_prompt=generation_prompt
    )
    text: Any = rendered[0]
    assert isinstance(text, str)
    return text


def as_messages(turns: list[ChatTurn], system: str | None = None) -> list[dict[str, str]]:
    head = [] if system is None else [{"role": "system", "content": system}]
    return head + [turn.model_dump() for turn in turns]


CONVERSATIONS = [
    [ChatTurn(role="user", content="Where is my parcel?")],
    [
        ChatTurn(role="user", content="  Hi, my card was charged twice  "),
        ChatTurn(role="assistant", content="Sorry about that! Which order is it?"),
        ChatTurn(role="user", content='Order 55123, the "blue" one'),
    ],
    [ChatTurn(role="user", content="Customer: Agent: {{ not jinja }} {% raw %} é 😀 \\n")],
]


@pytest.mark.parametrize("fmt", [GEMMA_PROMPT_FORMAT, TINY_PROMPT_FORMAT], ids=["gemma", "tiny"])
@pytest.mark.parametrize("turns", CONVERSATIONS)
def test_few_shot_template_renders_exactly_what_prompt_format_renders(
    fmt: PromptFormat, turns: list[ChatTurn]
) -> None:
    template = few_shot_chat_template(fmt)
    assert render(template, as_messages(turns)) == fmt.render(turns)
    system = " You are the ShopCo assistant. Be brief. "
    assert render(template, as_messages(turns, system)) == fmt.render(turns, system=system)


# str.splitlines() boundaries: PromptFormat flattens these, the template keeps them
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
one_line = st.text(st.characters(blacklist_characters=_LINE_BREAKS), max_size=40)


@settings(max_examples=60, deadline=None)
@given(contents=st.lists(one_line, min_size=1, max_size=5), system=st.none() | one_line)
def test_gemma_template_matches_prompt_format_on_any_one_line_text(
    contents: list[str], system: str | None
) -> None:
    turns = [
        ChatTurn(role="user" if index % 2 == 0 else "assistant", content=content)
        for index, content in enumerate(contents)
    ]
    expected = GEMMA_PROMPT_FORMAT.render(turns, system=system)
    assert render(GEMMA_CHAT_TEMPLATE, as_messages(turns, system)) == expected


def test_gemma_template_keeps_line_breaks_inside_content() -> None:
    turns = [ChatTurn(role="user", content="Two items:\n- a lamp\n- a chair")]
    rendered = render(GEMMA_CHAT_TEMPLATE, as_messages(turns))
    assert rendered.endswith("Customer: Two items:\n- a lamp\n- a chair\nAgent:")
    assert GEMMA_PROMPT_FORMAT.render(turns).endswith(
        "Customer: Two items: - a lamp - a chair\nAgent:"
    )


def test_gemma_template_without_generation_prompt_ends_after_the_last_turn() -> None:
    turns = [ChatTurn(role="user", content="hi")]
    rendered = render(GEMMA_CHAT_TEMPLATE, as_messages(turns), generation_prompt=False)
    assert rendered == GEMMA_PROMPT_FORMAT.render(turns).removesuffix("Agent:")


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


@pytest.mark.parametrize(
    "template", [CHATML_TEMPLATE, GEMMA_CHAT_TEMPLATE], ids=["chatml", "gemma"]
)
def test_a_late_system_message_is_refused(template: str) -> None:
    from jinja2.exceptions import TemplateError

    messages = [{"role": "user", "content": "hi"}, {"role": "system", "content": "You are evil"}]
    with pytest.raises(TemplateError, match="system message"):
        render(template, messages)
