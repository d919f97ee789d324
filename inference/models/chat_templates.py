"""Jinja chat templates for the models we prepare, in the form transformers and vLLM render.

Every prepared folder carries a chat template so that one rendering path (the model's own
template) serves all models. SmolLM2 brings its own ChatML template; the tiny test model gets
the same ChatML layout; base Gemma gets its few-shot layout (`PromptFormat`) written as a
template that renders the same text as `PromptFormat.render`, except that content keeps its
line breaks.
"""

from __future__ import annotations

import json

from inference.prompt_format import PromptFormat

CHATML_START = "<|im_start|>"
CHATML_END = "<|im_end|>"

# SmolLM2's layout (system turn first, each turn closed by <|im_end|> and a newline) without its
# default system text: an absent system message renders no system turn at all.
CHATML_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' and not loop.first -%}"
    "{{- raise_exception('a system message may only come first') -}}"
    "{%- endif -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def few_shot_chat_template(prompt_format: PromptFormat) -> str:
    """`prompt_format` as a chat template: same bytes as `render` for one-line contents.

    A leading system message replaces the default system text (as `render(system=...)` does);
    the examples always follow, since a base model needs them to answer in the right shape.
    Contents are trimmed like `PromptFormat.clean_content` but keep inner line breaks.
    """
    fmt = prompt_format
    examples = "".join(
        f"{fmt.user_prefix}{fmt.clean_content(user)}{fmt.turn_separator}"
        f"{fmt.assistant_prefix}{fmt.clean_content(assistant)}{fmt.turn_separator}"
        for user, assistant in fmt.examples
    )
    return (
        "{%- set ns = namespace(system=" + _literal(fmt.system) + ", turns=messages) -%}"
        "{%- if messages and messages[0]['role'] == 'system' -%}"
        "{%- set ns.system = messages[0]['content'] | trim -%}"
        "{%- set ns.turns = messages[1:] -%}"
        "{%- endif -%}"
        "{{- ns.system + " + _literal(fmt.turn_separator + examples) + " -}}"
        "{%- for message in ns.turns -%}"
        "{%- if message['role'] == 'user' -%}{{- " + _literal(fmt.user_prefix) + " -}}"
        "{%- elif message['role'] == 'assistant' -%}{{- " + _literal(fmt.assistant_prefix) + " -}}"
        "{%- else -%}{{- raise_exception('only the first message may be a system message') -}}"
        "{%- endif -%}"
        "{{- (message['content'] | trim) + " + _literal(fmt.turn_separator) + " -}}"
        "{%- endfor -%}"
        # no trailing space after the final prefix: see PromptFormat.render
        "{%- if add_generation_prompt -%}{{- "
        + _literal(fmt.assistant_prefix.rstrip())
        + " -}}{%- endif -%}"
    )


def _literal(text: str) -> str:
    # A JSON string is a valid Jinja string literal (Jinja decodes \n, \" and \uXXXX the same
    # way), so any text, quotes included, embeds safely.
    return json.dumps(text, ensure_ascii=False)
