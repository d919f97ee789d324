"""From a conversation to the engine's prompt: the chat template, tokens, and a history that
fits the context and stays a cached prefix.

The budget for the prompt is the context length minus the answer's `max_tokens` and a small
margin. A conversation that outgrows it loses its oldest turns *in large steps*, at *cut
points* that depend only on the messages before them (the first user turn past each multiple
of half the budget, counted in tokens from the conversation's start), so a growing
conversation keeps them. Where the kept history starts is decided on the history alone,
without the new question (`stable_cut`): the first cut point after which the history leaves
room for a question of `question_reserve` tokens (a quarter of the budget, at most 1,024).
So the cut of the next turn is known as soon as an answer ends: when it is a new one, the
worker prefills that trimmed prompt in the background right then (`next_cut`,
`PromptBuilder.next_history`, `inference/prefill.py`), and the next turn finds its history
in the prefix cache instead of re-reading all of it. For many turns in a row the kept history
starts at the same turn. Only a question longer than the reserve moves the cut further (the
next cut points, then the question alone), at a cut nobody prefilled (the typing prefill
does, when the page sends drafts). A message is never split, the system prompt is never
dropped, and the kept history always starts with a user turn. Only a last message that does
not fit on its own is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.chat_prompt import ChatTemplate, RenderedChat, special_token_ids, token_ids
from inference.engines.base import PromptTooLongError, prompt_too_long_message
from inference.wire.protocol import ChatTurn

# Chat markup per turn (role markers, separators) for the cut arithmetic; the real count of
# the final prompt is always measured.
_TURN_OVERHEAD_TOKENS = 8
# A trimmed history leaves room for a next question of a quarter of the budget, at most this:
# a question up to it lands on the cut prefilled when the last answer ended.
QUESTION_RESERVE_MAX_TOKENS = 1024


def question_reserve(budget: int) -> int:
    """Tokens a trimmed history leaves of `budget` for the next question (with its markup)."""
    return max(1, min(budget // 4, QUESTION_RESERVE_MAX_TOKENS))


def cut_points(roles: Sequence[str], tokens: Sequence[int], *, step: int) -> list[int]:
    """Where a kept history may start, oldest first: 0 (all of it), then the first user message
    at or past each multiple of `step` tokens from the conversation's start. A point depends
    only on the messages before it: a growing conversation keeps its points."""
    points = [0]
    position = 0  # tokens before message i
    threshold = step
    for index, (role, size) in enumerate(zip(roles, tokens, strict=True)):
        if role == "user" and index > 0 and position >= threshold:
            points.append(index)
            while threshold <= position:
                threshold += step
        position += size
    return points


def stable_cut(
    roles: Sequence[str], tokens: Sequence[int], *, fixed: int, budget: int, step: int
) -> int | None:
    """Where the kept history starts, decided on the history alone (the messages before the
    next question): the first cut point after which it fits the budget with
    `question_reserve(budget)` tokens to spare; None when none does. `fixed`: the tokens of
    the system block and the generation prompt; `tokens`: each message's."""
    room = budget - question_reserve(budget) - fixed
    after = sum(tokens)  # tokens from the point on
    before = 0
    points = cut_points(roles, tokens, step=step)
    index = 0
    for point in points:
        while index < point:
            before += tokens[index]
            index += 1
        if after - before <= room:
            return point
    return None


def cut_order(
    roles: Sequence[str], tokens: Sequence[int], *, fixed: int, budget: int, step: int
) -> list[int]:
    """The starts to try, best first: the stable cut of the history before the last question
    (0: all of it; the cut a prefill warmed when the last answer ended), then the later cut
    points, then the last user message alone (always last)."""
    last_user = max((i for i, role in enumerate(roles) if role == "user"), default=0)
    history = len(roles) - 1 if roles and roles[-1] == "user" else len(roles)
    stable = stable_cut(roles[:history], tokens[:history], fixed=fixed, budget=budget, step=step)
    first = 0 if stable is None else stable
    order = [] if stable is None else [stable]
    order += [p for p in cut_points(roles, tokens, step=step) if first < p < last_user]
    return [*order, last_user]


def next_cut(
    roles: Sequence[str],
    tokens: Sequence[int],
    *,
    fixed: int,
    budget: int,
    step: int,
    current: int,
) -> int | None:
    """After an answer (the messages end with it): where the next turn's kept history starts,
    when that is a cut other than `current` (where this turn's started), i.e. a prompt no
    earlier turn has put in the prefix cache. None: the next prompt is this one and its answer
    (cached), or no cut can be known before the question."""
    cut = stable_cut(roles, tokens, fixed=fixed, budget=budget, step=step)
    return None if cut is None or cut in (0, current) else cut


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
        self._fixed: tuple[str | None, int] | None = None  # the last system's fixed tokens

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
        """The prompt; with `trim`, the oldest turns go in steps once the history before the
        question leaves less than the question reserve (`cut_order`)."""
        budget = self._budget(max_tokens)
        if not messages:  # a warm-up: the system block alone, the prefix every prompt shares
            rendered, ids = self.render(system=system, messages=(), add_generation_prompt=False)
            return self._fitted(rendered, ids, max_tokens=max_tokens, kept_from=0)
        whole = self.render(system=system, messages=messages)
        # far from the limit (the estimate counts at most this much markup a message): the
        # stable cut is the whole history, without counting every message's tokens
        markup = _TURN_OVERHEAD_TOKENS * (len(messages) + 2)
        if not trim or len(whole[1]) + markup + question_reserve(budget) <= budget:
            return self._fitted(*whole, max_tokens=max_tokens, kept_from=0)
        roles, tokens, fixed = self._shape(system, messages)
        *starts, last_user = cut_order(
            roles, tokens, fixed=fixed, budget=budget, step=_step(budget)
        )
        for start in starts:
            rendered, ids = (
                whole if start == 0 else self.render(system=system, messages=messages[start:])
            )
            if len(ids) <= budget:
                return self._fitted(rendered, ids, max_tokens=max_tokens, kept_from=start)
        rendered, ids = self.render(system=system, messages=messages[last_user:])
        return self._fitted(rendered, ids, max_tokens=max_tokens, kept_from=last_user)

    def next_history(
        self,
        *,
        system: str | None,
        messages: Sequence[ChatTurn],
        answer: str,
        max_tokens: int,
    ) -> list[ChatTurn] | None:
        """After `answer` to `messages` (one turn of a conversation): the history the next
        turn's prompt will keep when it starts at another cut than this turn's (`next_cut`),
        the prompt to prefill now, before the question; None when there is none to prefill.
        `max_tokens`: the next answer's (the budget the next turn is cut for)."""
        current = self.build(
            system=system, messages=messages, max_tokens=max_tokens, trim=True
        ).kept_from
        history = [*messages, ChatTurn(role="assistant", content=answer)]
        budget = self._budget(max_tokens)
        roles, tokens, fixed = self._shape(system, history)
        cut = next_cut(
            roles, tokens, fixed=fixed, budget=budget, step=_step(budget), current=current
        )
        return None if cut is None else history[cut:]

    def build_continuation(
        self,
        *,
        system: str | None,
        messages: Sequence[ChatTurn],
        answer_so_far: str,
        max_tokens: int,
        trim: bool,
        continued_tokens: int = 0,
    ) -> BuiltPrompt:
        """The prompt of an answer that another engine began: the conversation, then the
        assistant turn open with `answer_so_far` (what the template renders for it, cut after
        its content, as Hugging Face's `continue_final_message` does), so the model goes on
        from the last character the user saw.

        `max_tokens` is the whole answer's budget and `continued_tokens` what the engines before
        generated of it: the history keeps the window the first engine's prompt had (cut for
        the whole budget, so prompt and answer fitted the context), and the rest of the budget
        is what is left. Should the text so far re-encode longer than it was generated, the
        window starts at a later question: the answer is never refused half-way."""
        kept_from = self.build(
            system=system, messages=messages, max_tokens=max_tokens, trim=trim
        ).kept_from
        starts = [kept_from]
        if trim:
            starts += [i for i, m in enumerate(messages) if m.role == "user" and i > kept_from]
        left = max(1, max_tokens - continued_tokens)
        for start in starts:
            cut = self._open_turn(system, messages[start:], answer_so_far)
            ids = self.encode(cut)
            if len(ids) < self.context_tokens or start == starts[-1]:
                break
        return self._fitted(cut, ids, max_tokens=left, kept_from=start)

    def _open_turn(
        self, system: str | None, messages: Sequence[ChatTurn], answer_so_far: str
    ) -> RenderedChat:
        kept = [*messages, ChatTurn(role="assistant", content=answer_so_far)]
        rendered = self.template.render(system=system, messages=kept, add_generation_prompt=False)
        start, end = rendered.content_spans[-1]
        # the template strips the content; what the user saw ended with that whitespace
        tail = answer_so_far[len(answer_so_far.rstrip()) :]
        return RenderedChat(
            text=rendered.text[:end] + tail,
            content_spans=(*rendered.content_spans[:-1], (start, end + len(tail))),
        )

    def _budget(self, max_tokens: int) -> int:
        return self.context_tokens - max_tokens - self._margin

    def _shape(
        self, system: str | None, messages: Sequence[ChatTurn]
    ) -> tuple[list[str], list[int], int]:
        """The numbers the cuts are decided on: each message's role and tokens (content and
        markup), and the tokens of the system block and the generation prompt."""
        if self._fixed is None or self._fixed[0] != system:
            _rendered, ids = self.render(system=system, messages=(), add_generation_prompt=False)
            self._fixed = (system, len(ids) + _TURN_OVERHEAD_TOKENS)
        roles: list[str] = [m.role for m in messages]
        tokens = [self._count(m.content) + _TURN_OVERHEAD_TOKENS for m in messages]
        return roles, tokens, self._fixed[1]

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


def _step(budget: int) -> int:
    """Cut points every half budget: a trim drops a good part of the history at once."""
    return max(budget // 2, 1)


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
