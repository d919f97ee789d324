"""Server events built from the run's log entries, with the socket's numbers and codes."""

from __future__ import annotations

from chatapp.answers.entries import LoggedDelta, LoggedEnd
from chatapp.grpc_api.generated import chat_pb2


def accepted(*, client_id: str, message_id: str) -> chat_pb2.ServerEvent:
    return chat_pb2.ServerEvent(
        accepted=chat_pb2.Accepted(client_id=client_id, message_id=message_id)
    )


def delta(*, message_id: str, entry: LoggedDelta) -> chat_pb2.ServerEvent:
    return chat_pb2.ServerEvent(
        delta=chat_pb2.Delta(message_id=message_id, seq=entry.seq, text=entry.text)
    )


def done(*, message_id: str, end: LoggedEnd) -> chat_pb2.ServerEvent:
    usage = chat_pb2.Usage(
        prompt_tokens=end.prompt_tokens or 0,
        completion_tokens=end.completion_tokens or 0,
        cached_prompt_tokens=end.cached_prompt_tokens or 0,
    )
    return chat_pb2.ServerEvent(
        done=chat_pb2.Done(
            message_id=message_id,
            status=end.status,
            finish_reason=end.finish_reason,
            source=end.source,
            usage=usage,
        )
    )


def error(*, message_id: str, end: LoggedEnd, retry_after_s: float = 0.0) -> chat_pb2.ServerEvent:
    return chat_pb2.ServerEvent(
        error=chat_pb2.Error(
            message_id=message_id,
            code=end.error_code or "internal",
            message=end.error_message,
            retry_after_s=retry_after_s,
        )
    )
