from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ClientEvent(_message.Message):
    __slots__ = ("send", "stop", "edit", "regenerate", "resume")
    SEND_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    EDIT_FIELD_NUMBER: _ClassVar[int]
    REGENERATE_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    send: Send
    stop: Stop
    edit: Edit
    regenerate: Regenerate
    resume: Resume
    def __init__(self, send: _Optional[_Union[Send, _Mapping]] = ..., stop: _Optional[_Union[Stop, _Mapping]] = ..., edit: _Optional[_Union[Edit, _Mapping]] = ..., regenerate: _Optional[_Union[Regenerate, _Mapping]] = ..., resume: _Optional[_Union[Resume, _Mapping]] = ...) -> None: ...

class Send(_message.Message):
    __slots__ = ("client_id", "text", "template", "sampling", "background")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    text: str
    template: TemplateRef
    sampling: Sampling
    background: bool
    def __init__(self, client_id: _Optional[str] = ..., text: _Optional[str] = ..., template: _Optional[_Union[TemplateRef, _Mapping]] = ..., sampling: _Optional[_Union[Sampling, _Mapping]] = ..., background: _Optional[bool] = ...) -> None: ...

class TemplateRef(_message.Message):
    __slots__ = ("id", "version", "variables")
    class VariablesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    VARIABLES_FIELD_NUMBER: _ClassVar[int]
    id: int
    version: int
    variables: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[int] = ..., version: _Optional[int] = ..., variables: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Sampling(_message.Message):
    __slots__ = ("max_tokens", "temperature", "top_p", "seed")
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    max_tokens: int
    temperature: float
    top_p: float
    seed: int
    def __init__(self, max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., seed: _Optional[int] = ...) -> None: ...

class Stop(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Edit(_message.Message):
    __slots__ = ("client_id", "text")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    text: str
    def __init__(self, client_id: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class Regenerate(_message.Message):
    __slots__ = ("client_id",)
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    def __init__(self, client_id: _Optional[str] = ...) -> None: ...

class Resume(_message.Message):
    __slots__ = ("client_id", "after_seq")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    after_seq: int
    def __init__(self, client_id: _Optional[str] = ..., after_seq: _Optional[int] = ...) -> None: ...

class ServerEvent(_message.Message):
    __slots__ = ("accepted", "delta", "done", "error")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    accepted: Accepted
    delta: Delta
    done: Done
    error: Error
    def __init__(self, accepted: _Optional[_Union[Accepted, _Mapping]] = ..., delta: _Optional[_Union[Delta, _Mapping]] = ..., done: _Optional[_Union[Done, _Mapping]] = ..., error: _Optional[_Union[Error, _Mapping]] = ...) -> None: ...

class Accepted(_message.Message):
    __slots__ = ("client_id", "message_id")
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    message_id: str
    def __init__(self, client_id: _Optional[str] = ..., message_id: _Optional[str] = ...) -> None: ...

class Delta(_message.Message):
    __slots__ = ("message_id", "seq", "text")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    seq: int
    text: str
    def __init__(self, message_id: _Optional[str] = ..., seq: _Optional[int] = ..., text: _Optional[str] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("prompt_tokens", "completion_tokens", "cached_prompt_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., cached_prompt_tokens: _Optional[int] = ...) -> None: ...

class Done(_message.Message):
    __slots__ = ("message_id", "status", "finish_reason", "source", "usage")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    status: str
    finish_reason: str
    source: str
    usage: Usage
    def __init__(self, message_id: _Optional[str] = ..., status: _Optional[str] = ..., finish_reason: _Optional[str] = ..., source: _Optional[str] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("message_id", "code", "message", "retry_after_s")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_S_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    code: str
    message: str
    retry_after_s: float
    def __init__(self, message_id: _Optional[str] = ..., code: _Optional[str] = ..., message: _Optional[str] = ..., retry_after_s: _Optional[float] = ...) -> None: ...
