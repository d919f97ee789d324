"""Request and response bodies of the OpenAI-compatible API (docs/api.md), as pydantic models.

Requests are validated strictly (no "1" for 1) from the raw JSON. Parameters this server
cannot honour are accepted only with their neutral value, so a client never silently gets
something other than what it asked for; unknown parameters are refused like OpenAI does.
"""

from __future__ import annotations

from typing import Any, Literal

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
    # Accepted only when neutral (see NEUTRAL below).
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    logit_bias: dict[str, float] | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None
    service_tier: str | None = None
    modalities: list[str] | None = None
    ignore_eos: bool | None = None  # vLLM's extension; generation always stops at the end
    # Extensions (docs/api.md): templates by reference, skipping the FAQ cache, priority.
    template: TemplateRef | None = None
    faq: bool = True
    priority: Priority | None = None


# Parameter -> the values that mean "nothing special": anything else is refused with 400.
NEUTRAL: dict[str, tuple[Any, ...]] = {
    "n": (None, 1),
    "store": (None, False),
    "frequency_penalty": (None, 0, 0.0),
    "presence_penalty": (None, 0, 0.0),
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "logit_bias": (None, {}),
    "stop": (None, [], ""),
    "seed": (None,),
    "tools": (None, []),
    "tool_choice": (None, "none", "auto"),
    "parallel_tool_calls": (None, True, False),
    "response_format": (None, {"type": "text"}),
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


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str
    refusal: None = None


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    logprobs: None = None
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
    logprobs: None = None
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
