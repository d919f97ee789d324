"""From a conversation to the engine's prompt: the chat template, tokens, and a history that
fits the context and stays a cached prefix.

The budget for the prompt is the context length minus the answer's `max_tokens` and a small
margin. A conversation that outgrows it loses its oldest turns *in large steps*: the kept
history starts at the first user turn past a multiple of half the budget (counted in tokens
from the conversation's start), so for many turns in a row the kept history starts at the same
turn, every prompt starts with the same tokens, and vLLM's prefix cache keeps serving them. A
message is never split, the system prompt is never dropped, and the kept history always starts
with a user turn. Only a last message that does not fit on its own is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.chat_prompt import ChatTemplate, RenderedChat, special_token_ids, token_ids
from inference.engines.base import PromptTooLongError, prompt_too_long_message
from inference.protocol import ChatTurn

# Chat markup per turn (role markers, separators) for the step arithmetic; the real count of
# the final prompt is always measured.
_TURN_OVERHEAD_TOKENS = 8


@dataclass(frozen=True, slots=True)
class BuiltPrompt:
    text: str
    token_ids: list[int]
    max_tokens: int  # the answer's budget: what was asked, capped to what the context leaves
    kept_from: int  # index of the first message kept (0: the whole history)


class PromptBuilder:
    def __init__(
        self,
        *,
        template: ChatTemplate,
        encode: Callable[[RenderedChat], list[int]],
        count: Callable[[str], int],
        context_tokens: int,
        decode: Callable[[list[int]], str] = lambda ids: " ".join(map(str, ids)),
        margin_tokens: int = 8,
    ) -> None:
        self.template = template
        self.encode = encode
        self.decode = decode  # for messages to people only
        self._count = count
        self.context_tokens = context_tokens
        self._margin = margin_tokens

    def render(
        self,
        *,
        system: str | None,
        messages: Sequence[ChatTurn],
        add_generation_prompt: bool = True,
    ) -> tuple[RenderedChat, list[int]]:
        rendered = self.template.render(
            system=system, messages=messages, add_generation_prompt=add_generation_prompt
        )
        return rendered, self.encode(rendered)

    def build(
        self,
        *,
        system: str | None,
        messages: Sequence[ChatTurn],
        max_tokens: int,
        trim: bool,
    ) -> BuiltPrompt:
        """The prompt; with `trim`, the oldest turns go in steps when it would not fit."""
        budget = self.context_tokens - max_tokens - self._margin
        if not messages:  # a warm-up: the system block alone, the prefix every prompt shares
            rendered, ids = self.render(system=system, messages=(), add_generation_prompt=False)
            return self._fitted(rendered, ids, max_tokens=max_tokens, kept_from=0)
        rendered, ids = self.render(system=system, messages=messages)
        if len(ids) <= budget or not trim:
            return self._fitted(rendered, ids, max_tokens=max_tokens, kept_from=0)
        for start in self._step_starts(messages, step=max(budget // 2, 1)):
            rendered, ids = self.render(system=system, messages=messages[start:])
            if len(ids) <= budget:
                return self._fitted(rendered, ids, max_tokens=max_tokens, kept_from=start)
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        rendered, ids = self.render(system=system, messages=messages[last_user:])
        return self._fitted(rendered, ids, max_tokens=max_tokens, kept_from=last_user)

    def build_continuation(
        self,
        *,
        system: str | None,
        messages: Sequence[ChatTurn],
        answer_so_far: str,
        max_tokens: int,
        trim: bool,
    ) -> BuiltPrompt:
        """The prompt of an answer that another engine began: the conversation, then the
        assistant turn open with `answer_so_far` (what the template renders for it, cut after
        its content, as Hugging Face's `continue_final_message` does), so the model goes on
        from the last character the user saw."""
        kept_from = self.build(
            system=system, messages=messages, max_tokens=max_tokens, trim=trim
        ).kept_from
        kept = [*messages[kept_from:], ChatTurn(role="assistant", content=answer_so_far)]
        rendered = self.template.render(system=system, messages=kept, add_generation_prompt=False)
        start, end = rendered.content_spans[-1]
        # the template strips the content; what the user saw ended with that whitespace
        tail = answer_so_far[len(answer_so_far.rstrip()) :]
        cut = RenderedChat(
            text=rendered.text[:end] + tail,
            content_spans=(*rendered.content_spans[:-1], (start, end + len(tail))),
        )
        return self._fitted(cut, self.encode(cut), max_tokens=max_tokens, kept_from=kept_from)

    def _step_starts(self, messages: Sequence[ChatTurn], *, step: int) -> list[int]:
        """Candidate first messages, oldest first: one per multiple of `step` tokens."""
        starts: list[int] = []
        position = 0  # tokens before message i
        threshold = step
        for index, message in enumerate(messages):
            if message.role == "user" and index > 0 and position >= threshold:
                starts.append(index)
                while threshold <= position:
                    threshold += step
            position += self._count(message.content) + _TURN_OVERHEAD_TOKENS
        return starts

    def _fitted(
        self, rendered: RenderedChat, ids: list[int], *, max_tokens: int, kept_from: int
    ) -> BuiltPrompt:
        room = self.context_tokens - len(ids)
        if room < 1:  # vLLM's own limit: the prompt plus at least one answer token
            raise PromptTooLongError(
                prompt_too_long_message(prompt_tokens=len(ids), max_model_len=self.context_tokens)
            )
        return BuiltPrompt(
            text=rendered.text,
            token_ids=ids,
            max_tokens=min(max_tokens, room),
            kept_from=kept_from,
        )


def folder_prompt_builder(
    *, model_dir: Path, context_tokens: int, chat_template: str | None = None
) -> PromptBuilder:
    """The builder of a model folder's own tokenizer, without loading the model (the admin lint,
    the benches): the same one `VllmEngine` builds on vLLM's copy of that tokenizer."""
    from transformers import AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    return tokenizer_prompt_builder(
        tokenizer, context_tokens=context_tokens, chat_template=chat_template
    )


def tokenizer_prompt_builder(
    tokenizer: Any, *, context_tokens: int, chat_template: str | None = None
) -> PromptBuilder:
    """The builder for a Hugging Face tokenizer: its chat template (or `chat_template`), safe
    tokenization (`inference/chat_prompt.py`). Raises ChatTemplateError without a template."""
    template = ChatTemplate.of_tokenizer(tokenizer, override=chat_template)
    specials = special_token_ids(tokenizer)

    def count(text: str) -> int:
        ids = tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        return len(ids)

    return PromptBuilder(
        template=template,
        encode=lambda rendered: token_ids(tokenizer, rendered, specials=specials),
        count=count,
        context_tokens=context_tokens,
        decode=lambda ids: str(tokenizer.decode(ids)),
    )
