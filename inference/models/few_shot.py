"""A few-shot chat layout for a BASE model, written as its chat template at prepare time.

A base model (the packaged Gemma) has no chat template and never ends a chat-style turn; it
continues a few-shot Q&A text well: a system text, a few example exchanges, then the
conversation, each turn on its own line behind a speaker prefix, ending with the assistant
prefix. This module turns such a layout into a Jinja chat template, so a base model goes
through the same rendering path as any instruct model (`inference/chat_prompt.py`). Stop
strings and the answer length go to the folder's generation_config.json.

The system text and examples come first and never depend on the user, so every prompt starts
with the same tokens. A leading system message (a template's system prompt) replaces the
default system text; the examples stay, since a base model needs them to answer in shape.
Turn markers typed by a user stay text: the renderer tokenizes content with
`split_special_tokens=True`, and a "Customer:" typed inside a message cannot start a turn of
its own only in so far as the model respects line starts: content keeps its line breaks.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field


class FewShotLayout(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    system: str
    examples: list[tuple[str, str]] = Field(default_factory=list)
    user_prefix: str = Field(min_length=1)
    assistant_prefix: str = Field(min_length=1)
    turn_separator: str = Field(min_length=1)
    stop: list[str] = Field(default_factory=list)
    default_max_tokens: int = Field(ge=1, le=8192)

    def chat_template(self, *, bos: bool) -> str:
        """The layout as a chat template; `bos`: start with the tokenizer's BOS token.

        The final assistant prefix loses its trailing whitespace: SentencePiece/BPE
        tokenizers attach a word's leading space to the word, and a prompt ending in a lone
        space token derails the model (measured on Gemma 3 270M: numbered lists, HTML,
        loops); answers then start with a space, which the worker strips.
        """
        examples = "".join(
            f"{self.user_prefix}{user}{self.turn_separator}"
            f"{self.assistant_prefix}{assistant}{self.turn_separator}"
            for user, assistant in self.examples
        )
        return (
            ("{{- bos_token -}}" if bos else "")
            + "{%- set ns = namespace(system="
            + _literal(self.system.strip())
            + ", turns=messages) -%}"
            "{%- if messages and messages[0]['role'] == 'system' -%}"
            "{%- set ns.system = messages[0]['content'] | trim -%}"
            "{%- set ns.turns = messages[1:] -%}"
            "{%- endif -%}"
            "{{- ns.system + " + _literal(self.turn_separator + examples) + " -}}"
            "{%- for message in ns.turns -%}"
            "{%- if message['role'] == 'user' -%}{{- " + _literal(self.user_prefix) + " -}}"
            "{%- elif message['role'] == 'assistant' -%}{{- "
            + _literal(self.assistant_prefix)
            + " -}}"
            "{%- else -%}{{- raise_exception('only the first message may be a system message') -}}"
            "{%- endif -%}"
            "{{- (message['content'] | trim) + " + _literal(self.turn_separator) + " -}}"
            "{%- endfor -%}"
            "{%- if add_generation_prompt -%}{{- "
            + _literal(self.assistant_prefix.rstrip())
            + " -}}{%- endif -%}"
        )


def _literal(text: str) -> str:
    # A JSON string is a valid Jinja string literal (Jinja decodes \n, \" and \uXXXX the same
    # way), so any text, quotes included, embeds safely.
    return json.dumps(text, ensure_ascii=False)
