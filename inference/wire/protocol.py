"""Wire schemas between the web process and inference workers.

This module is the whole contract: the web side builds `GenerateRequest` / `CancelRequest`,
workers answer with `WorkerEvent`s. Messages travel through a Channels channel layer as plain
dicts (msgpack-able), so every model dumps to JSON-compatible primitives. The `type` field
doubles as the Channels handler name on the consumer side (`inference.delta` ->
`inference_delta`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    model_serializer,
)

REQUEST_CHANNEL = "inference.requests"
# Background work (prefix warm-ups, batch API calls): workers run only a few of these at once,
# so they never take the running slots interactive chat needs.
BACKGROUND_CHANNEL = "inference.background"
# vLLM's priority scheduling runs lower values first.
INTERACTIVE_PRIORITY = 0
BACKGROUND_PRIORITY = 10

FinishReason = Literal["stop", "length", "abort"]
# context_length: the prompt does not fit the model (the conversation is too long)
ErrorCode = Literal["invalid_request", "context_length", "engine", "overloaded", "internal"]


class WireMessage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_channel(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class ChatTurn(WireMessage):
    role: Literal["user", "assistant"]
    content: str


class ResponseFormat(WireMessage):
    """Constrain the answer to JSON (vLLM structured outputs); `json_schema` None: any object."""

    json_schema: dict[str, Any] | None = None


class SamplingOptions(WireMessage):
    """What a request asks for; a field left None takes the model's default
    (its generation_config.json, `inference/generation_config.py`)."""

    max_tokens: int | None = Field(default=None, ge=1, le=32768)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    repetition_penalty: float | None = Field(default=None, gt=0.0, le=2.0)
    frequency_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    presence_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    seed: int | None = None
    # extra stop strings, on top of the model's own
    stop: list[str] = Field(default_factory=list, max_length=4)
    response_format: ResponseFormat | None = None
    # None: no logprobs; N: each answer token's logprob and its N likeliest alternatives
    logprobs: int | None = Field(default=None, ge=0, le=20)
    # token id -> bias added to its logit (OpenAI's logit_bias, vLLM's SamplingParams)
    logit_bias: dict[int, float] | None = Field(default=None, max_length=1024)


class FaqLookup(WireMessage):
    """Ask the worker to try the FAQ cache (while the engine starts), in these scopes
    ("global", "template:<id>")."""

    scopes: list[str] = Field(min_length=1, max_length=8)


class GenerateRequest(WireMessage):
    type: Literal["inference.generate"] = "inference.generate"
    request_id: str = Field(min_length=1, max_length=64)
    reply_channel: str = Field(min_length=1, max_length=100)
    # The conversation's fixed system prompt (a template's); None: the model's default.
    system: str | None = Field(default=None, max_length=100_000)
    # Empty only for a prefix-cache warm-up: the prompt is then the shared prefix alone.
    messages: list[ChatTurn] = Field(default_factory=list, max_length=1000)
    sampling: SamplingOptions = SamplingOptions()
    priority: int = 0
    submitted_at: float
    # Set only for a question that stands alone (see docs/protocol.md); None: model only.
    faq_lookup: FaqLookup | None = None
    # A history longer than the model's context loses its oldest turns in steps
    # (`inference/prompt_builder.py`); False: refused as too long (the OpenAI API's default).
    trim_history: bool = True
    # The conversation the request belongs to: its turns go to the engine that holds its
    # history in the prefix cache (routing affinity; a router in front of an OpenAI-compatible
    # engine gets it as X-Session-ID). None: no affinity.
    session_id: str | None = Field(default=None, max_length=100)
    # A migrated answer (its first worker died mid-answer): the answer text so far, which the
    # prompt ends with as the open assistant turn, the seq of its first new event, and the
    # tokens generated before (the rest of `max_tokens` is what is left of the answer's budget;
    # the history keeps the window cut for the whole of it, `PromptBuilder.build_continuation`).
    continue_from: str | None = Field(default=None, max_length=400_000)
    first_seq: int = Field(default=1, ge=1)
    continued_tokens: int = Field(default=0, ge=0)


# A typing prefill older than this when a worker takes it is dropped: the user sent, or left.
PREFILL_MAX_AGE_S = 10.0


class PrefillRequest(WireMessage):
    """Typing prefill: run a conversation's prompt with the user's draft as its next question
    through the engine (one token, background priority, answered to nobody), so that when the
    user presses Send the prompt is already in the prefix cache. A worker drops it when it is
    older than `PREFILL_MAX_AGE_S` or the worker is answering chat; drafts are never stored
    or logged."""

    type: Literal["inference.prefill"] = "inference.prefill"
    request_id: str = Field(min_length=1, max_length=64)
    system: str | None = Field(default=None, max_length=100_000)
    messages: list[ChatTurn] = Field(min_length=1, max_length=1000)
    submitted_at: float
    session_id: str | None = Field(default=None, max_length=100)

    def as_generate(self) -> GenerateRequest:
        """The engine request it runs: the question's prompt, one token, behind chat."""
        return GenerateRequest(
            request_id=self.request_id,
            reply_channel="-",  # nobody: the worker runs it for its cache only
            system=self.system,
            messages=self.messages,
            sampling=SamplingOptions(max_tokens=1),
            priority=BACKGROUND_PRIORITY,
            submitted_at=self.submitted_at,
            session_id=self.session_id,
        )


class CancelRequest(WireMessage):
    type: Literal["inference.cancel"] = "inference.cancel"
    request_id: str


class Accepted(WireMessage):
    type: Literal["inference.accepted"] = "inference.accepted"
    request_id: str
    worker_channel: str
    queue_wait_ms: float


class Heartbeat(WireMessage):
    """Sent every few seconds while a request runs, so a requester can tell a dead worker
    from a slow prefill."""

    type: Literal["inference.heartbeat"] = "inference.heartbeat"
    request_id: str


class TopLogprob(WireMessage):
    token: str
    logprob: float


class TokenLogprob(WireMessage):
    """One answer token: its text, its logprob and the likeliest alternatives (best first)."""

    token: str
    logprob: float
    top: list[TopLogprob] = Field(default_factory=list)


class LogprobsWhenAsked(WireMessage):
    """A message with an optional `logprobs` field, which its dump leaves out when nobody
    asked for them."""

    @model_serializer(mode="wrap")
    def _drop_absent_logprobs(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("logprobs", ...) is None:
            del data["logprobs"]
        return data


class Delta(LogprobsWhenAsked):
    type: Literal["inference.delta"] = "inference.delta"
    request_id: str
    seq: int = Field(ge=1)
    text: str
    tokens: int = Field(ge=0)
    # only when the request asked for logprobs (SamplingOptions.logprobs): one per token
    logprobs: list[TokenLogprob] | None = None


class SuggestedEntry(WireMessage):
    """An FAQ entry offered under a model answer when the FAQ decision was unsure between
    entries ("Did you mean ...?"): sending `question` back is answered from that entry."""

    entry_id: int
    question: str = Field(max_length=500)


class AnswerStats(WireMessage):
    """How an answer was made. Declared once: the worker's `Done`, the run's logged end, the
    stored message (same column names) and what the browser and the API are shown all carry
    these, and move them as a whole (`stats_of`), never field by field."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    queue_wait_ms: float | None = None
    ttft_ms: float | None = None
    total_ms: float | None = None
    # "faq": the answer is an admin-approved FAQ entry's, streamed without the model.
    source: Literal["model", "faq"] = "model"
    faq_entry_id: int | None = None
    # a model answer to a question that came close to this FAQ entry without being answered
    # from it (`inference.faq.cache.FaqNear`): the admin lists the question as a suggestion
    faq_near_entry_id: int | None = None
    # FAQ entries the decision found likely but did not answer from (`FaqNear.suggestions`)
    suggested_entries: list[SuggestedEntry] = Field(default_factory=list, max_length=2)
    # its first worker died mid-answer and it went on on another one (migration)
    resumed: bool = False


def stats_of(source: BaseModel | object) -> AnswerStats:
    """The `AnswerStats` of anything that carries them (a `Done`, a logged end, a stored row),
    and nothing else of it."""
    return AnswerStats.model_validate({name: getattr(source, name) for name in _STATS})


_STATS = tuple(AnswerStats.model_fields)


class WorkerHops(WireMessage):
    """Where a worker's time to the first delta went, in ms on the worker's clock from when it
    started serving the request (`docs/architecture.md`, "One message's first token"). None:
    the answer never got that far (or came from the FAQ cache, which renders no prompt)."""

    prompt_ms: float | None = None  # the prompt rendered with the model's chat template
    engine_first_token_ms: float | None = None  # the engine's first visible text
    first_delta_sent_ms: float | None = None  # handed to the channel layer (after the FAQ verdict)


class Done(AnswerStats):
    type: Literal["inference.done"] = "inference.done"
    request_id: str
    seq: int = Field(ge=1)
    finish_reason: FinishReason
    # a worker always knows these (an answer logged or stored later may not)
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    queue_wait_ms: float
    total_ms: float
    faq_score: float | None = None
    hops: WorkerHops | None = None


class Error(WireMessage):
    type: Literal["inference.error"] = "inference.error"
    request_id: str
    seq: int = Field(ge=1)
    code: ErrorCode
    message: str


class FaqEntryData(WireMessage):
    """One FAQ entry as workers index it; vectors are float32, row per phrasing, base64."""

    entry_id: int
    scope: str
    answer: str
    phrasings: list[str] = Field(min_length=1)
    vectors_b64: str


class FaqUpsert(WireMessage):
    type: Literal["faq.upsert"] = "faq.upsert"
    entries: list[FaqEntryData]


class FaqRemove(WireMessage):
    type: Literal["faq.remove"] = "faq.remove"
    entry_ids: list[int]


class FaqSnapshotRequest(WireMessage):
    """A worker asks the web side for every enabled entry (on start-up)."""

    type: Literal["faq.snapshot_request"] = "faq.snapshot_request"
    reply_channel: str


class FaqSnapshotChunk(WireMessage):
    type: Literal["faq.snapshot_chunk"] = "faq.snapshot_chunk"
    entries: list[FaqEntryData]
    last: bool


class FaqSyncRequest(WireMessage):
    """A worker asks, every few seconds, whether its FAQ set is still the web side's.

    `version` is `inference.faq.sync.set_version` of the entries it indexes; the web side
    answers with a full snapshot (FaqSnapshotChunk...) when its own set differs, then always
    with FaqInSync. Upserts and removals are broadcasts, which the channel layer may drop, and
    so may this request: a worker repeats it until it is confirmed in sync.
    """

    type: Literal["faq.sync_request"] = "faq.sync_request"
    reply_channel: str
    version: str
    # the worker's own clock (time.monotonic()) when it sent this; echoed in FaqInSync
    sent_at: float
    # what decides this worker's FAQ answers, in words (`FaqDecider.describe`): the admin's
    # FAQ list shows it, e.g. while the verifier is still being trained
    decision: str = ""


class FaqInSync(WireMessage):
    """The web side's set was `version` after `sent_at` (the request's own time): a worker
    that indexes exactly that set is confirmed fresh as of `sent_at`."""

    type: Literal["faq.in_sync"] = "faq.in_sync"
    version: str
    sent_at: float


FaqSnapshotServe = Annotated[FaqSnapshotRequest | FaqSyncRequest, Field(discriminator="type")]
faq_snapshot_serve_adapter: TypeAdapter[FaqSnapshotServe] = TypeAdapter(FaqSnapshotServe)

FAQ_WORKERS_GROUP = "inference.faq"
FAQ_SNAPSHOT_CHANNEL = "faq.snapshots"


class PrefixListRequest(WireMessage):
    """A starting worker asks for the published templates' system prompts, to warm its prefix
    cache with them before it takes chat; every web process answers on `PREFIX_LIST_CHANNEL`."""

    type: Literal["prefix.list_request"] = "prefix.list_request"
    reply_channel: str


class PrefixList(WireMessage):
    type: Literal["prefix.list"] = "prefix.list"
    system_prompts: list[str] = Field(default_factory=list, max_length=1000)


PREFIX_LIST_CHANNEL = "prompts.prefixes"

WorkerEvent = Annotated[Accepted | Heartbeat | Delta | Done | Error, Field(discriminator="type")]
WorkerInbound = Annotated[
    GenerateRequest
    | PrefillRequest
    | CancelRequest
    | FaqUpsert
    | FaqRemove
    | FaqSnapshotChunk
    | FaqInSync,
    Field(discriminator="type"),
]

worker_event_adapter: TypeAdapter[WorkerEvent] = TypeAdapter(WorkerEvent)
worker_inbound_adapter: TypeAdapter[WorkerInbound] = TypeAdapter(WorkerInbound)
