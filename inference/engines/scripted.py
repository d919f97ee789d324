"""A deterministic scripted engine for fast unit tests of the streaming pipeline.

It is NOT a model and never the product path: it echoes the last user message back word by
word at a fixed pace, so tests can assert exact text, ordering, stop and error handling in
milliseconds. Selected only with `INFERENCE_ENGINE=scripted`. Test hooks in the user text:
`[[fail]]` makes the engine fail after two words, `[[slow]]` slows it to 50 ms a word,
`[[stall]]` waits one second before the first word (a long, silent prefill). A prompt of
more than `max_prompt_tokens` words is refused as vLLM refuses one longer than its context.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from inference.chat_prompt import ChatTemplate, RenderedChat
from inference.engines.base import (
    EngineDelta,
    EngineError,
    EngineRequest,
    EngineStats,
    PromptTooLongError,
    prompt_too_long_message,
)
from inference.generation_config import GenerationDefaults
from inference.models.chat_templates import CHATML_END, CHATML_START, CHATML_TEMPLATE
from inference.prompt_builder import PromptBuilder

SCRIPTED_DEFAULTS = GenerationDefaults(max_tokens=64, temperature=0.0)
_LAST_USER = f"{CHATML_START}user\n"


def scripted_reply(prompt: str) -> str:
    last_user = prompt.rsplit(_LAST_USER, 1)[-1].split(CHATML_END)[0]
    return f"You said: {' '.join(last_user.split())}"


def _words(rendered: RenderedChat) -> list[int]:
    # "tokens" of the scripted engine: whitespace-separated words (their ids do not matter)
    return list(range(len(rendered.text.split())))


class ScriptedEngine:
    def __init__(self, *, delay_s: float = 0.002, max_prompt_tokens: int = 100_000) -> None:
        self._delay_s = delay_s
        self._running: set[str] = set()
        self.prompts: list[str] = []  # every prompt it was given, for tests
        # The same ChatML layout as the tiny test model, so the worker's path is the real one.
        self._builder = PromptBuilder(
            template=ChatTemplate(source=CHATML_TEMPLATE),
            encode=_words,
            count=lambda text: len(text.split()),
            context_tokens=max_prompt_tokens + 1,
        )

    @property
    def max_prompt_tokens(self) -> int:
        return self._builder.context_tokens - 1

    @max_prompt_tokens.setter
    def max_prompt_tokens(self, value: int) -> None:  # tests lower it to hit the "context"
        self._builder.context_tokens = value + 1

    @property
    def prompt_builder(self) -> PromptBuilder:
        return self._builder

    @property
    def defaults(self) -> GenerationDefaults:
        return SCRIPTED_DEFAULTS

    async def stream(self, request: EngineRequest) -> AsyncIterator[EngineDelta]:
        self.prompts.append(request.prompt)
        words = scripted_reply(request.prompt).split(" ")
        delay = 0.05 if "[[slow]]" in words[-1] or "[[slow]]" in request.prompt else self._delay_s
        prompt_tokens = len(request.prompt_token_ids)
        if prompt_tokens > self.max_prompt_tokens:
            raise PromptTooLongError(
                prompt_too_long_message(
                    prompt_tokens=prompt_tokens, max_model_len=self.max_prompt_tokens + 1
                )
            )
        self._running.add(request.request_id)
        try:
            if "[[stall]]" in request.prompt:
                await asyncio.sleep(1.0)
            for index, word in enumerate(words[: request.max_tokens]):
                await asyncio.sleep(delay)
                if index == 2 and "[[fail]]" in request.prompt:
                    raise EngineError("scripted failure")
                last = index == len(words) - 1 or index == request.max_tokens - 1
                yield EngineDelta(
                    text=word if index == 0 else f" {word}",
                    tokens=1,
                    finish_reason=("stop" if index == len(words) - 1 else "length")
                    if last
                    else None,
                    prompt_tokens=prompt_tokens,
                    cached_prompt_tokens=0,
                )
        finally:
            self._running.discard(request.request_id)

    async def abort(self, request_id: str) -> None:
        self._running.discard(request_id)

    async def check_health(self) -> None:
        return None

    def stats(self) -> EngineStats:
        running = len(self._running)
        return EngineStats(
            unfinished_requests=running,
            running_requests=running,
            waiting_requests=0,
            prefix_cache_queries=0,
            prefix_cache_hits=0,
        )

    def shutdown(self) -> None:
        return None
