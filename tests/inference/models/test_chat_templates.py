"""The chat templates we write, rendered the way transformers (and so vLLM) renders them."""

from __future__ import annotations

from typing import Any

import pytest

from inference.models.chat_templates import CHATML_TEMPLATE
from inference.models.gemma import GEMMA_CHAT_TEMPLATE
from inference.protocol import ChatTurn

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


# The whole few-shot prompt for one question, as Gemma is meant to continue it.
GEMMA_ONE_QUESTION = (
    "<bos>Below is a chat between a customer and a support agent of ShopCo, an online store. "
    "The agent answers each question in one or two short, friendly sentences.\n"
    "Customer: Hi there\nAgent: Hello! How can I help you today?\n"
    "Customer: How do I reset my password?\n"
    'Agent: Click "Forgot password" on the sign-in page and follow the link we email you.\n'
    "Customer: Can I change my delivery address after ordering?\n"
    'Agent: Yes, as long as the order has not shipped yet: open it under "My orders" and '
    'choose "Edit address".\n'
    "Customer: How long does a refund take?\n"
    "Agent: Refunds reach your account within 5 to 10 business days after we receive the "
    "returned item.\n"
    "Customer: Where is my parcel?\nAgent:"
)


def test_gemma_template_renders_the_few_shot_prompt() -> None:
    turns = [ChatTurn(role="user", content="  Where is my parcel?  ")]
    assert render(GEMMA_CHAT_TEMPLATE, as_messages(turns)) == GEMMA_ONE_QUESTION


def test_a_system_prompt_replaces_the_default_text_and_the_examples_stay() -> None:
    turns = [
        ChatTurn(role="user", content="Hi, my card was charged twice"),
        ChatTurn(role="assistant", content="Sorry about that! Which order is it?"),
        ChatTurn(role="user", content='Order 55123, the "blue" one'),
    ]
    rendered = render(GEMMA_CHAT_TEMPLATE, as_messages(turns, " You are the ShopCo bot. "))
    assert rendered.startswith("<bos>You are the ShopCo bot.\nCustomer: Hi there\n")
    assert rendered.endswith(
        "Customer: Hi, my card was charged twice\n"
        "Agent: Sorry about that! Which order is it?\n"
        'Customer: Order 55123, the "blue" one\nAgent:'
    )


def test_template_syntax_in_content_is_text() -> None:
    turns = [ChatTurn(role="user", content="{{ not jinja }} {% raw %} é 😀")]
    rendered = render(GEMMA_CHAT_TEMPLATE, as_messages(turns))
    assert rendered.endswith("Customer: {{ not jinja }} {% raw %} é 😀\nAgent:")


def test_gemma_template_keeps_line_breaks_inside_content() -> None:
    turns = [ChatTurn(role="user", content="Two items:\n- a lamp\n- a chair")]
    rendered = render(GEMMA_CHAT_TEMPLATE, as_messages(turns))
    assert rendered.endswith("Customer: Two items:\n- a lamp\n- a chair\nAgent:")


def test_gemma_template_without_generation_prompt_ends_after_the_last_turn() -> None:
    turns = [ChatTurn(role="user", content="Where is my parcel?")]
    rendered = render(GEMMA_CHAT_TEMPLATE, as_messages(turns), generation_prompt=False)
    assert rendered == GEMMA_ONE_QUESTION.removesuffix("Agent:")


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
