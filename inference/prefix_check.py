"""Does the chat template keep the system prompt a byte-identical (token-identical) prefix?

vLLM's prefix cache shares the KV blocks of the system prompt across users only if every
prompt with that system prompt starts with the same tokens. Some templates put per-request
text before the conversation (Llama 3.x adds "Today Date: ..."), which makes every day's, or
every request's, prefix different. Checked the way it matters, on tokens: the system block
rendered alone must be the first tokens of two different conversations rendered on different
dates. Run at worker start (`inference/runtime.py`); a failure is reported with the fix.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from inference.prompt_builder import PromptBuilder
from inference.wire.protocol import ChatTurn

PROBE_SYSTEM = "You are the support agent of an online store. Answer briefly and politely."
_DAY_A = dt.datetime(2025, 1, 2, 9, 30)
_DAY_B = dt.datetime(2026, 7, 19, 17, 5)


@dataclass(frozen=True, slots=True)
class PrefixReport:
    stable: bool
    system_tokens: int  # tokens of the system block alone
    shared_tokens: int  # tokens the two probe conversations have in common from the start
    detail: str


def _dated(day: dt.datetime) -> dict[str, object]:
    # A template variable shadows the environment's global of the same name.
    return {"strftime_now": lambda fmt: day.strftime(fmt)}


def prefix_report(builder: PromptBuilder, *, system: str = PROBE_SYSTEM) -> PrefixReport:
    template = builder.template

    def ids(messages: list[ChatTurn], day: dt.datetime, generation: bool) -> list[int]:
        rendered = template.render(
            system=system, messages=messages, add_generation_prompt=generation, extra=_dated(day)
        )
        return builder.encode(rendered)

    block = ids([], _DAY_A, False)
    first = ids([ChatTurn(role="user", content="Where is my order?")], _DAY_A, True)
    second = ids(
        [
            ChatTurn(role="user", content="I would like a refund for a broken lamp."),
            ChatTurn(role="assistant", content="I am sorry to hear that."),
            ChatTurn(role="user", content="How long will it take?"),
        ],
        _DAY_B,
        True,
    )
    shared = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        shared += 1
    stable = first[: len(block)] == block == second[: len(block)]
    if stable:
        detail = f"the {len(block)}-token system block is a shared prefix"
    else:
        where = _around(builder, first, shared)
        detail = (
            f"two conversations with the same system prompt share only {shared} of the "
            f"{len(block)} tokens of its block (they differ at {where!r}): "
            "the chat template puts per-request text (a date, a name, an id) before the "
            "conversation, so the prefix cache cannot reuse the system prompt across users. "
            "Fix: set CHAT_TEMPLATE to a copy of the template without it (docs/operations.md)."
        )
    return PrefixReport(
        stable=stable, system_tokens=len(block), shared_tokens=shared, detail=detail
    )


def _around(builder: PromptBuilder, ids: list[int], index: int) -> str:
    return builder.decode(ids[max(0, index - 4) : index + 6])
