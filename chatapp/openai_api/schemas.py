"""Request and response bodies of the OpenAI-compatible API (docs/api.md), as pydantic models.

Requests are validated strictly (no "1" for 1) from the raw JSON; the sampling parameters'
shapes that a type cannot say (stop, response_format, logit_bias keys, top_logprobs without
logprobs) are checked in `sampling.py`. Parameters this server cannot honour are accepted
only with their neutral value, so a client never silently gets something other than what it
asked for; unknown parameters are refused like OpenAI does.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Priority = Literal["interactive", "background"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class TextPart(_Strict):
    type: Literal["text"]
    text: str


class MessageIn(_Strict):
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart]
    name: str | None = None  # accepted, not used

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class StreamOptions(_Strict):
    include_usage: bool = False


class TemplateRef(_Strict):
    """Extension: start from a published prompt template (docs/api.md, "Templates")."""

    id: int
    version: int | None = None  # None: the latest published version
    sha256: str | None = None  # checked when given: the version the client expects
    variables: dict[str, str | int] = Field(default_factory=dict)


class ChatCompletionRequest(_Strict):
    model: str
    messages: list[MessageIn] = Field(max_length=1000)
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(default=None, ge=1, le=8192)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=8192)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    n: int | None = None
    user: str | None = None  # accepted, not used
    metadata: dict[str, str] | None = None  # accepted, not used
    store: bool | None = None
    # Honoured (checked further and mapped in `sampling.py`).
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    logit_bias: dict[str, Annotated[float, Field(ge=-100.0, le=100.0)]] | None = Field(
        default=None, max_length=300
    )
    stop: str | list[str] | None = None
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    response_format: dict[str, Any] | None = None
    # Accepted only when neutral (see NEUTRAL below).
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    service_tier: str | None = None
    modalities: list[str] | None = None
    ignore_eos: bool | None = None  # vLLM's extension; answers end where the model ends them
    # Extensions (docs/api.md): templates by reference, skipping the FAQ cache, priority.
    template: TemplateRef | None = None
    faq: bool = True
    priority: Priority | None = None
    # "auto": a conversation over the model's context loses its oldest turns (in steps, the
    # system prompt kept) instead of a 400 context_length_exceeded (OpenAI's behaviour).
    truncation: Literal["auto", "disabled"] = "disabled"


# Parameter -> the values that mean "nothing special": anything else is refused with 400.
# n > 1: one request is one stored answer streamed by one relay. tools: the service has no
# tool-call parser or tool loop. modalities: text only. store: answers are always stored as
# the key's conversations, never for OpenAI's distillation. ignore_eos: an answer that runs
# past the model's end of turn is not a chat answer (and holds a running slot to max_tokens).
NEUTRAL: dict[str, tuple[Any, ...]] = {
    "n": (None, 1),
    "store": (None, False),
    "tools": (None, []),
    "tool_choice": (None, "none", "auto"),
    "parallel_tool_calls": (None, True, False),
    "service_tier": (None, "auto", "default"),
    "modalities": (None, ["text"]),
    "ignore_eos": (None, False),
}


# ---- responses -------------------------------------------------------------------------


class PromptTokensDetails(BaseModel):
    cached_tokens: int


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails


class FaqMarker(BaseModel):
    """Extension: the answer is an admin-approved FAQ entry's, not the model's."""

    entry_id: int | None


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None  # the token's UTF-8 bytes


class TokenLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None
    top_logprobs: list[TopLogprob]


class ChoiceLogprobs(BaseModel):
    content: list[TokenLogprob] | None
    refusal: None = None


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str
    refusal: None = None


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    logprobs: ChoiceLogprobs | None = None  # when asked (logprobs: true)
    finish_reason: Literal["stop", "length"]


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    system_fingerprint: str | None = None  # "faq" for FAQ answers
    x_faq: FaqMarker | None = None


class ChunkDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: ChunkDelta
    logprobs: ChoiceLogprobs | None = None  # this chunk's tokens, when asked
    finish_reason: Literal["stop", "length"] | None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    system_fingerprint: str | None = None
    x_faq: FaqMarker | None = None
    usage: Usage | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "instant-chat"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]
