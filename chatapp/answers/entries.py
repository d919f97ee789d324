"""What an answer's stream log holds, in order: deltas `1..n`, then one end entry `n+1`.

The same entries go live to every socket watching the answer and into the log a reconnecting
socket replays from, so a client that knows the last `seq` it has can be given exactly the rest.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from inference.wire.protocol import AnswerStats, LogprobsWhenAsked, TokenLogprob, WorkerHops

EndStatus = Literal["complete", "stopped", "failed"]


class LoggedDelta(LogprobsWhenAsked):
    kind: Literal["delta"] = "delta"
    seq: int = Field(ge=1)
    text: str
    # the tokens' logprobs, only when the request asked for them (the OpenAI API's logprobs)
    logprobs: list[TokenLogprob] | None = None


class LoggedEnd(AnswerStats):
    """How a run ended: the one "answer ended" type of the web side (logged, shown to every
    watcher, stored through `answer_store`), with the worker's `AnswerStats`."""

    kind: Literal["end"] = "end"
    seq: int = Field(ge=1)
    status: EndStatus
    finish_reason: str = ""
    # set when status is "failed", or "stopped" for a reason other than the user's Stop
    error_code: str = ""
    error_message: str = ""
    # where the worker's time to the first delta went (not stored with the answer)
    worker_hops: WorkerHops | None = None
    # the page offers a person under this answer: it says it cannot help, or the question
    # asked for one (`relay.offers_person`; told live only, not stored)
    offer_person: bool = False


LogEntry = LoggedDelta | LoggedEnd
log_entry_adapter: TypeAdapter[LogEntry] = TypeAdapter(
    Annotated[LogEntry, Field(discriminator="kind")]
)


def text_of(entries: list[LogEntry]) -> str:
    return "".join(e.text for e in entries if isinstance(e, LoggedDelta))
