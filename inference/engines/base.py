"""The narrow engine interface every worker talks to.

Modelled on vLLM's `EngineClient`: stream deltas for a request, abort it, report health and
stats. Cancelling the task that iterates `stream()` is the abort path; `abort()` exists for
callers that only hold the request id.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from inference.wire.protocol import FinishReason, TokenLogprob

if TYPE_CHECKING:
    from inference.generation_config import GenerationDefaults
    from inference.prompt_builder import PromptBuilder


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineRequest:
    request_id: str
    # The rendered prompt and its tokens (`PromptBuilder`): the engine runs the tokens.
    prompt: str
    prompt_token_ids: list[int]
    max_tokens: int
    temperature: float
    top_p: float
    stop: tuple[str, ...]
    top_k: int = 0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: int | None = None
    # a JSON schema the answer must match (structured outputs); {} = any JSON object
    json_schema: dict[str, Any] | None = None
    priority: int = 0
    # None: no logprobs; N: each new token's logprob and its N likeliest alternatives
    logprobs: int | None = None
    logit_bias: dict[int, float] | None = None  # token id -> bias added to its logit
    # the conversation (GenerateRequest.session_id), for engines behind an affinity router
    session_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineDelta:
    """New text since the previous delta of the same request."""

    text: str
    tokens: int
    finish_reason: FinishReason | None
    prompt_tokens: int
    cached_prompt_tokens: int
    # one per new token when the request asked for logprobs, else None
    logprobs: tuple[TokenLogprob, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineStats:
    unfinished_requests: int
    running_requests: int
    waiting_requests: int
    prefix_cache_queries: int
    prefix_cache_hits: int


def finish_reason_of(reason: str | None) -> FinishReason:
    """An engine's finish reason as the protocol's: "length" and "abort" as they are, anything
    else (a stop string or token, or none said) "stop"."""
    return _FINISH_REASONS.get(reason or "stop", "stop")


_FINISH_REASONS: dict[str, FinishReason] = {"stop": "stop", "length": "length", "abort": "abort"}

# JSON has no -inf: a token the sampler could not pick (structured outputs mask it), or one
# whose logprob the engine did not say, gets this, as in vLLM's own OpenAI server.
MIN_LOGPROB = -9999.0


class EngineError(Exception):
    """The engine failed (not the request's fault)."""


class EngineDeadError(EngineError):
    """The engine cannot serve again (vLLM's engine core died, perhaps killed by a request):
    the worker stops at once. A plain EngineError from a health check (a remote engine's
    `/health` failing) may be a blip: the worker stops only when it persists."""


class RequestRejectedError(Exception):
    """The engine cannot serve this request as asked, e.g. a prompt longer than the model's
    context: the request's fault, not the engine's. The message is for the end user."""


class PromptTooLongError(RequestRejectedError):
    """The prompt does not fit the model's context (plus at least one answer token)."""


def prompt_too_long_message(*, prompt_tokens: int, max_model_len: int) -> str:
    return (
        f"This conversation is too long for the model ({prompt_tokens} tokens; it takes at most "
        f"{max_model_len - 1} plus the answer). Start a new conversation or shorten the message."
    )


class ModelFolderEngine:
    """What an engine of a model folder holds: the builder that renders prompts with the
    folder's tokenizer and chat template, and the sampling defaults of its
    generation_config.json (the two properties of `Engine`)."""

    def __init__(self, *, builder: PromptBuilder, defaults: GenerationDefaults) -> None:
        self._builder = builder
        self._defaults = defaults

    @property
    def prompt_builder(self) -> PromptBuilder:
        return self._builder

    @property
    def defaults(self) -> GenerationDefaults:
        return self._defaults


class Engine(Protocol):
    @property
    def prompt_builder(self) -> PromptBuilder:
        """Renders conversations with this model's chat template, within its context."""
        ...

    @property
    def defaults(self) -> GenerationDefaults:
        """The model's own sampling defaults (its generation_config.json)."""
        ...

    def stream(self, request: EngineRequest) -> AsyncIterator[EngineDelta]: ...

    async def abort(self, request_id: str) -> None: ...

    async def check_health(self) -> None: ...

    def stats(self) -> EngineStats: ...

    def shutdown(self) -> None: ...
