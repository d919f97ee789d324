"""Jinja chat templates for the models we prepare, in the form transformers and vLLM render.

Every prepared folder carries a chat template so that one rendering path (the model's own
template) serves all models. SmolLM2 brings its own ChatML template; the tiny test model gets
the same ChatML layout. Any other model is used through the chat template its folder carries.
"""

from __future__ import annotations

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
