"""A deterministic scripted engine for fast unit tests of the streaming pipeline.

It is NOT a model and never the product path: it echoes the last user message back word by
word at a fixed pace, so tests can assert exact text, ordering, stop and error handling in
milliseconds. Selected only with `INFERENCE_ENGINE=scripted`. Test hooks in the user text:
`[[fail]]` makes the engine fail after two words, `[[slow]]` slows it to 50 ms a word,
`[[stall]]` waits one second before the first word (a long, silent prefill). A prompt that
ends inside an assistant turn (a migrated answer) goes on after the words already said.
Attributes fake a broken engine: `hang_after_tokens` (the stream stops after that many words
and waits until cancelled), `health_error` (`check_health` raises it), `health_hangs` (it
never returns).
A prompt of more than `max_prompt_tokens` words is refused by its prompt builder, as for vLLM.
Stop strings end the reply where they first appear (left out, finish reason "stop"), and
asked-for logprobs are fakes with a fixed shape: 0.0 for the word, then `alt1`, `alt2`, ...
at -1.0, -2.0, ... (the word itself first among the alternatives).
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
)
from inference.generation_config import GenerationDefaults
from inference.models.chat_templates import CHATML_END, CHATML_START, CHATML_TEMPLATE
from inference.prompt_builder import PromptBuilder
from inference.wire.protocol import TokenLogprob, TopLogprob

SCRIPTED_DEFAULTS = GenerationDefaults(max_tokens=64, temperature=0.0)
_LAST_USER = f"{CHATML_START}user\n"


def scripted_reply(prompt: str) -> str:
    last_user = prompt.rsplit(_LAST_USER, 1)[-1].split(CHATML_END)[0]
    return f"You said: {' '.join(last_user.split())}"


def _said_so_far(prompt: str) -> str:
    """The open assistant turn a migrated answer's prompt ends with ("" for a new answer)."""
    _head, marker, tail = prompt.rpartition(f"{CHATML_START}assistant\n")
    if not marker or CHATML_END in tail:
        return ""
    return tail


def scripted_logprob(token: str, top_n: int) -> TokenLogprob:
    """The scripted engine's fake logprobs for one word: deterministic, the shape is real."""
    top = [TopLogprob(token=token, logprob=0.0)]
    top += [TopLogprob(token=f" alt{i}", logprob=-float(i)) for i in range(1, top_n)]
    return TokenLogprob(token=token, logprob=0.0, top=top[:top_n])


def _until_stop(pieces: list[str], stop: tuple[str, ...]) -> list[str]:
    """The reply's pieces up to the first stop string, which is left out (as vLLM does)."""
    text = "".join(pieces)
    cuts = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    if not cuts:
        return pieces
    cut, used, out = min(cuts), 0, []
    for piece in pieces:
        if used + len(piece) >= cut:
            if piece[: cut - used]:
                out.append(piece[: cut - used])
            break
        out.append(piece)
        used += len(piece)
    return out


def _words(rendered: RenderedChat) -> list[int]:
    # "tokens" of the scripted engine: whitespace-separated words (their ids do not matter)
    return list(range(len(rendered.text.split())))


class ScriptedEngine:
    def __init__(self, *, delay_s: float = 0.002, max_prompt_tokens: int = 100_000) -> None:
        self._delay_s = delay_s
        self._running: set[str] = set()
        self.prompts: list[str] = []  # every prompt it was given, for tests
        self.requests: list[EngineRequest] = []  # and every request, with its sampling
        # Fault knobs for tests: a wedged engine that stops after this many pieces of a reply
        # (until cancelled), and a health check that raises or never returns.
        self.hang_after_tokens: int | None = None
        self.health_error: Exception | None = None
        self.health_hangs = False
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
        self.requests.append(request)
        words = scripted_reply(request.prompt).split(" ")
        said = _said_so_far(request.prompt)
        if said:  # a migrated answer: go on after what was said (whole words)
            words = words[len(said.split(" ")) :] if said.strip() else words
        delay = 0.05 if "[[slow]]" in request.prompt else self._delay_s
        pieces = _until_stop(
            [w if i == 0 and not said else f" {w}" for i, w in enumerate(words)], request.stop
        )
        prompt_tokens = len(request.prompt_token_ids)  # fits: its prompt builder checked
        self._running.add(request.request_id)
        try:
            if "[[stall]]" in request.prompt:
                await asyncio.sleep(1.0)
            for index, text in enumerate(pieces[: request.max_tokens] or [""]):
                if index == self.hang_after_tokens:
                    await asyncio.Event().wait()  # wedged: no token ever again, until cancelled
                await asyncio.sleep(delay)
                if index == 2 and "[[fail]]" in request.prompt:
                    raise EngineError("scripted failure")
                last = index >= len(pieces) - 1 or index == request.max_tokens - 1
                yield EngineDelta(
                    text=text,
                    tokens=1,
                    finish_reason=("stop" if index >= len(pieces) - 1 else "length")
                    if last
                    else None,
                    prompt_tokens=prompt_tokens,
                    cached_prompt_tokens=0,
                    logprobs=None
                    if request.logprobs is None
                    else (scripted_logprob(text, request.logprobs),),
                )
        finally:
            self._running.discard(request.request_id)

    async def abort(self, request_id: str) -> None:
        self._running.discard(request_id)

    async def check_health(self) -> None:
        if self.health_hangs:
            await asyncio.Event().wait()
        if self.health_error is not None:
            raise self.health_error

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
