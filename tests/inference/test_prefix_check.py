"""The worker checks that its chat template keeps the system prompt a shared token prefix."""

from __future__ import annotations

from inference.chat_prompt import ChatTemplate
from inference.engines.scripted import ScriptedEngine
from inference.prefix_check import prefix_report
from inference.prompt_builder import PromptBuilder

# The shape of Llama 3.1's template: a date before the system prompt.
DATED = (
    "{{ '<|start_header_id|>system<|end_header_id|>\\n\\nToday Date: ' "
    "+ strftime_now('%d %b %Y') }}"
    "{% for m in messages %}{{ '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' "
    "+ m.content + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>' }}{% endif %}"
)


def _words_builder(source: str) -> PromptBuilder:
    return PromptBuilder(
        template=ChatTemplate(source=source),
        encode=lambda rendered: [hash(w) for w in rendered.text.split()],
        count=lambda text: len(text.split()),
        context_tokens=4096,
        decode=lambda ids: f"{len(ids)} tokens",
    )


def test_chatml_keeps_the_system_block_a_shared_prefix() -> None:
    report = prefix_report(ScriptedEngine().prompt_builder)
    assert report.stable, report.detail
    assert report.shared_tokens >= report.system_tokens > 0


def test_a_template_that_puts_the_date_first_is_reported_with_the_fix() -> None:
    report = prefix_report(_words_builder(DATED))
    assert not report.stable
    assert report.shared_tokens < report.system_tokens
    assert "CHAT_TEMPLATE" in report.detail
    assert "date" in report.detail
