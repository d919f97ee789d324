"""Hostile and malformed frames on the chat socket, through the full ASGI app.

Property: whatever a client sends (binary, oversized, not JSON, deeply nested JSON, JSON that
is not an object, wrong field types, huge numbers, invalid UUIDs, lone surrogates, NUL bytes,
RTL marks, unknown types, extra fields, bogus template references and patches, stop /
regenerate / feedback for messages that do not exist or belong to someone else), the server
never crashes and answers every frame with a frame of its own typed protocol
(`schemas.server_frame_adapter`): a `chat.error` with a known code for a bad frame, a normal
reply for a valid one; afterwards the same socket still answers a plain `chat.send` with
`chat.accepted`, deltas and `chat.done`, and another user's data is untouched.

Each hypothesis example opens its own socket (so a crash in one example cannot poison the
next, and shrinking works), sends one to three hostile frames, checks each reply, then checks
that the socket still works. Examples are derandomized: CI sees the same frames every run.

Raw text frames never contain unescaped lone surrogates: a WebSocket text frame is UTF-8 and
the server (daphne/autobahn) drops a connection with invalid UTF-8 before the consumer sees
it. Inside JSON they are sent escaped (`"\\ud800"`), which is valid JSON and does reach it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from hypothesis import HealthCheck, currently_in_test_context, event, given, note, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from chatapp.conversations.models import Conversation, Message
from chatapp.prompts import services as prompt_services
from chatapp.prompts.textpatch import make_patch, sha256_hex
from chatapp.realtime.schemas import (
    CLIENT_FRAME_TYPES,
    ERROR_CODES,
    client_frame_adapter,
    server_frame_adapter,
)
from tests.chatapp.prompts.factories import template_create
from tests.conftest import Connect, RunningWorker

pytestmark = pytest.mark.django_db(transaction=True)

MAX_FRAME_BYTES: int = django_settings.CHAT_MAX_FRAME_BYTES
MAX_MESSAGE_CHARS: int = django_settings.CHAT_MAX_MESSAGE_CHARS
REPLY_TIMEOUT_S = 15.0  # the scripted engine answers in milliseconds; a busy CI box may not
# JSON nested this deep is refused somehow (Python's json gives up near 1000 levels, less the
# stack in use): the oracle accepts any typed error for it.
TOO_DEEP = 800
# `internal` is the server admitting a bug ("something went wrong on our side"): never an
# acceptable answer to a client's frame, however hostile.
CLIENT_ERROR_CODES = frozenset(ERROR_CODES - {"internal", "unavailable"})
CANONICAL_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
BOB_SECRET = "bob's order 7731 never came"  # must never reach Alice's socket
VALUES = {"order_id": "A-1042", "remedy": "refund"}
RENDERED = "My order A-1042 has not arrived. I would like a refund."

FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=False,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # one world (users, template) per test function
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)

Frame = dict[str, Any]


# ---- the world the frames aim at --------------------------------------------------------


@dataclass(frozen=True)
class World:
    alice: User
    alice_conversation: str
    alice_answer: str
    bob_conversation: str
    bob_answer: str
    template_id: int
    template_version: int
    template_sha256: str


def _answered_conversation(owner: User, question: str) -> tuple[str, str]:
    conversation = Conversation.objects.create(owner=owner, title=question)
    asked = Message.objects.create(
        conversation=conversation,
        role=Message.Role.USER,
        content=question,
        sender=owner,
        client_message_id=uuid.uuid4(),
    )
    answer = Message.objects.create(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        content=f"You said: {question}",
        status=Message.Status.COMPLETE,
        finish_reason="stop",
        reply_to=asked,
    )
    return str(conversation.id), str(answer.id)


def _world_create() -> World:
    alice = User.objects.create_user("alice", password="pw-alice-123")
    bob = User.objects.create_user("bob", password="pw-bob-123")
    alice_conversation, alice_answer = _answered_conversation(alice, "alice asks")
    bob_conversation, bob_answer = _answered_conversation(bob, BOB_SECRET)
    version = prompt_services.template_publish(template=template_create(), user=None)
    return World(
        alice=alice,
        alice_conversation=alice_conversation,
        alice_answer=alice_answer,
        bob_conversation=bob_conversation,
        bob_answer=bob_answer,
        template_id=version.template_id,
        template_version=version.version,
        template_sha256=version.sha256,
    )


@pytest.fixture
async def world(scripted_worker: RunningWorker, settings: Any) -> World:
    """Alice (who sends), Bob (whose data must stay untouched) and a published template.

    Alice sends hundreds of questions in a few seconds here: per-user admission limits, where
    the server has them, are lifted so that every refusal seen is about the frame itself.
    """
    settings.CHAT_USER_RATE = 1_000_000
    settings.CHAT_USER_MAX_CONCURRENT = 1_000
    return await sync_to_async(_world_create)()


def _bob_state(world: World) -> list[tuple[Any, ...]]:
    return list(
        Message.objects.filter(conversation_id=world.bob_conversation)
        .order_by("created_at")
        .values_list("id", "content", "status", "feedback", "finish_reason")
    )


# ---- hostile inputs and what the protocol says must come back ---------------------------


@dataclass(frozen=True)
class Hostile:
    """One frame as it goes on the wire: text, or binary when `data` is set."""

    text: str = ""
    data: bytes | None = None

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # hypothesis' printer
        printer.text(repr(self))

    def __repr__(self) -> str:  # short, for failure reports
        if self.data is not None:
            return f"Hostile(data={self.data[:200]!r}{'...' if len(self.data) > 200 else ''})"
        shown = self.text if len(self.text) <= 400 else self.text[:400] + "..."
        return f"Hostile(text={shown!r}, {len(self.text.encode())} bytes)"


def _encode(value: Any, ascii_only: bool) -> str:
    """JSON text for `value`; lone surrogates are always escaped (raw ones are not UTF-8)."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    try:
        text.encode()
    except UnicodeEncodeError:
        text = json.dumps(value, ensure_ascii=True)
    return text


def as_json(value: Any, ascii_only: bool = True) -> Hostile:
    return Hostile(text=_encode(value, ascii_only))


def _decoded(hostile: Hostile) -> Any:
    """The JSON value the server will see, or a marker why it will not see one."""
    if hostile.data is not None:
        return _BINARY
    if len(hostile.text.encode()) > MAX_FRAME_BYTES:
        return _OVERSIZED
    if nesting_depth(hostile.text) >= TOO_DEEP:
        return _TOO_DEEP
    try:
        return json.loads(hostile.text)
    except ValueError:
        return _NOT_JSON


def nesting_depth(text: str) -> int:
    """How deep `[` and `{` nest in `text`, outside JSON strings (no parsing, no recursion)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_BINARY, _OVERSIZED, _TOO_DEEP, _NOT_JSON = (
    _Marker(n) for n in ("binary", "oversized", "too deep", "not json")
)


def _client_type(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    kind = value.get("type")
    return kind if isinstance(kind, str) and kind in CLIENT_FRAME_TYPES else None


def expected_error_codes(hostile: Hostile) -> frozenset[str] | None:
    """The error codes the protocol allows as the answer, or None if a normal reply may come.

    docs/protocol.md: binary -> refused; over CHAT_MAX_FRAME_BYTES -> too_large; not JSON ->
    bad_json; not an object of a known type -> unknown_type; fields missing or wrong -> invalid
    (too_large for a text over CHAT_MAX_MESSAGE_CHARS). Valid frames may get any reply.
    """
    value = _decoded(hostile)
    if value is _BINARY:
        return frozenset({"invalid", "bad_json"})
    if value is _OVERSIZED:
        return frozenset({"too_large"})
    if value is _TOO_DEEP:  # valid JSON, beyond any sane nesting: any typed refusal will do
        return CLIENT_ERROR_CODES
    if value is _NOT_JSON:
        return frozenset({"bad_json"})
    if not _unicode_clean(value):  # escaped lone surrogates: no text can be stored with them
        return frozenset({"invalid"})
    # NaN and Infinity are Python's extensions, not JSON: refusing them as bad_json is fine too
    lenient = frozenset() if _strict_json(hostile.text) else frozenset({"bad_json"})
    if _client_type(value) is None:
        return frozenset({"unknown_type"}) | lenient
    try:
        frame = client_frame_adapter.validate_python(value)
    except ValidationError:
        return frozenset({"invalid", "too_large"}) | lenient
    if frame.type == "chat.stop":  # nothing ever streams on the socket when it is sent
        return frozenset({"not_found"})
    if frame.type == "chat.send" and frame.text is not None and len(frame.text) > MAX_MESSAGE_CHARS:
        return frozenset({"too_large", "invalid"})
    return None


def _unicode_clean(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True


def _strict_json(text: str) -> bool:
    def refuse(constant: str) -> Any:
        raise ValueError(constant)

    try:
        json.loads(text, parse_constant=refuse)
    except ValueError:
        return False
    return True


def expected_client_id(hostile: Hostile) -> str | None:
    value = _decoded(hostile)
    if isinstance(value, dict):
        raw = value.get("id")
        if isinstance(raw, str) and CANONICAL_UUID.match(raw):
            return raw
    return None


# Crashes this file found, all fixed and kept below as named cases: JSON nested ~940 deep
# (RecursionError out of json.loads), a template id >= 2**63 (OverflowError in the database
# lookup) and a list or object as `type` (unhashable in the frame-type set lookup).


# ---- talking to the socket --------------------------------------------------------------


async def open_socket(connect: Connect, user: User) -> WebsocketCommunicator:
    ws = await connect(user)
    connected, _ = await ws.connect()
    assert connected
    return ws


async def next_frame(ws: WebsocketCommunicator, waiting_for: str) -> Frame:
    """The next server frame, validated against the server-frame schema.

    A consumer that crashed re-raises its exception here, with its traceback, at once; one
    that says nothing fails with a clear message instead of hanging. (`receive_from` would
    wait out its whole timeout after a crash, and cancel the app on a timeout.)
    """
    getter = asyncio.ensure_future(ws.output_queue.get())
    done, _ = await asyncio.wait(
        {getter, ws.future}, timeout=REPLY_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED
    )
    if getter not in done:
        getter.cancel()
        if ws.future.done():
            ws.future.result()  # the consumer crashed: raise its exception
            raise AssertionError(f"the socket closed (waiting for {waiting_for})")
        raise AssertionError(f"no reply within {REPLY_TIMEOUT_S} s (waiting for {waiting_for})")
    message = getter.result()
    assert message["type"] == "websocket.send", f"socket closed: {message} ({waiting_for})"
    raw = message.get("text")
    assert isinstance(raw, str), f"server sent a non-text frame {message!r}"
    server_frame_adapter.validate_json(raw)  # every server frame is one typed ServerFrame
    frame: Frame = json.loads(raw)
    return frame


async def exchange(ws: WebsocketCommunicator, hostile: Hostile) -> list[Frame]:
    """Send one frame, collect its whole answer (an error, or accepted ... done/error)."""
    # send_input, not send_to: send_to refuses empty frames, which a client can send
    if hostile.data is not None:
        await ws.send_input({"type": "websocket.receive", "bytes": hostile.data})
    else:
        await ws.send_input({"type": "websocket.receive", "text": hostile.text})
    replies = [await next_frame(ws, f"the reply to {hostile!r}")]
    if replies[0]["type"] in STREAMING:
        while replies[-1]["type"] not in ("chat.done", "chat.error"):
            replies.append(await next_frame(ws, "the end of the answer"))
    return replies


# an answer streams as accepted (or, resumed, snapshot/delta), started (a worker took it),
# then deltas, then done or error
STREAMING = frozenset({"chat.accepted", "chat.started", "chat.snapshot", "chat.delta"})


def check_stream(replies: list[Frame], message_id: str) -> None:
    """Deltas in order (a snapshot restarts the count), all of one message, then its end."""
    expected_seq: int | None = 1
    for reply in replies[:-1]:
        assert reply["type"] in ("chat.started", "chat.delta", "chat.snapshot"), replies
        if reply["type"] == "chat.started":
            assert reply["message_id"] == message_id, replies
            continue
        assert reply["message_id"] == message_id, replies
        if reply["type"] == "chat.snapshot":
            expected_seq = None
            continue
        if expected_seq is not None:
            assert reply["seq"] == expected_seq, f"a gap in the answer: {replies}"
        expected_seq = reply["seq"] + 1
    end = replies[-1]
    if end["type"] == "chat.done":
        assert end["message_id"] == message_id, replies
    else:  # a retried send of an answer that had failed: it says so again
        assert end["type"] == "chat.error", replies
        assert end["code"] in ("engine", "interrupted"), replies


def check_replies(hostile: Hostile, replies: list[Frame], world: World) -> None:
    """What a user would notice: one typed answer that fits the frame that was sent."""
    assert BOB_SECRET not in json.dumps(replies), f"another user's text leaked: {replies}"
    first = replies[0]
    kind = first["type"]
    allowed = expected_error_codes(hostile)
    if allowed is not None:
        assert kind == "chat.error", f"expected an error {sorted(allowed)}, got {replies}"
        assert first["code"] in allowed, f"expected one of {sorted(allowed)}, got {first}"
    if kind == "chat.error":
        assert first["code"] in CLIENT_ERROR_CODES, f"the server failed on this frame: {first}"
        assert first["message"], "an error must say something to people"
        assert len(replies) == 1
        client_id = expected_client_id(hostile)
        if client_id is not None:
            assert first["id"] == client_id, "the error must name the frame it answers"
        if _decoded(hostile) in (_BINARY, _OVERSIZED, _NOT_JSON) or isinstance(
            _decoded(hostile), list | str | int | float | bool | None
        ):
            assert first["id"] is None, "an error for a frame without an id names none"
        return

    # A normal reply: only for a frame that passed validation, and of the matching kind.
    value = _decoded(hostile)
    frame = client_frame_adapter.validate_python(value)
    if "id" in first:
        assert first["id"] == str(frame.id), "the reply must name the frame it answers"
    if kind == "chat.feedback_recorded":
        assert frame.type == "chat.feedback"
        assert (first["message_id"], first["rating"]) == (str(frame.message_id), frame.rating)
        assert first["message_id"] != world.bob_answer
        assert len(replies) == 1
    elif kind == "chat.resend_full":
        assert frame.type == "chat.send"
        assert frame.template is not None
        assert len(replies) == 1
    elif kind == "chat.accepted":
        assert frame.type in ("chat.send", "chat.regenerate")
        assert first["conversation_id"] != world.bob_conversation
        assert first["assistant_message_id"] != world.bob_answer
        check_stream(replies[1:], first["assistant_message_id"])
    elif kind in STREAMING or kind == "chat.done":  # the rest of an answer, shown again
        assert frame.type == "chat.resume", replies
        assert first["message_id"] == str(frame.message_id) != world.bob_answer
        check_stream(replies, first["message_id"])
    else:
        raise AssertionError(f"unexpected first reply {first}")


async def check_still_usable(ws: WebsocketCommunicator) -> None:
    """The same socket answers a plain question from start to finish."""
    question = {
        "type": "chat.send",
        "id": str(uuid.uuid4()),
        "conversation_id": None,
        "text": "still there?",
    }
    replies = await exchange(ws, as_json(question))
    assert replies[0]["type"] == "chat.accepted", replies
    assert replies[0]["id"] == question["id"]
    assert replies[-1]["type"] == "chat.done", replies
    assert replies[-1]["status"] == "complete"
    assert "".join(r.get("text", "") for r in replies[1:-1]) == "You said: still there?"


async def run_example(connect: Connect, world: World, frames: list[Hostile]) -> None:
    """One socket: every frame gets its typed answer, then the socket still works."""
    before = await sync_to_async(_bob_state)(world)
    ws = await open_socket(connect, world.alice)
    try:
        for hostile in frames:
            if currently_in_test_context():
                note(f"sending {hostile!r}")
            replies = await exchange(ws, hostile)
            if currently_in_test_context():  # --hypothesis-show-statistics: what got through
                first = replies[0]
                event(f"-> {first['type']} {first.get('code') or first.get('reason') or ''}")
            check_replies(hostile, replies, world)
        await check_still_usable(ws)
    finally:
        with contextlib.suppress(Exception):
            await ws.disconnect()
    assert await sync_to_async(_bob_state)(world) == before, "another user's data changed"


# ---- strategies -------------------------------------------------------------------------

FIELD_NAMES = (
    "type",
    "id",
    "conversation_id",
    "text",
    "message_id",
    "rating",
    "bypass_faq",
    "template",
    "variables",
    "patch",
    "result_sha256",
    "sha256",
    "version",
    "__proto__",
    "constructor",
    "",
)
UNKNOWN_TYPES = (
    "chat.dance",
    "Chat.Send",
    "chat.send ",
    " chat.send",
    "chat.send\x00",
    "chat.\u202esend",
    "chat.accepted",  # a server frame type, not a client one
    "chat.error",
    "templates.changed",
    "inference.generate",  # the worker protocol must not be reachable from the browser
    "inference.cancel",
    "chat.watchdog",  # a consumer handler name, must not be dispatchable
    "websocket.disconnect",
    "",
)
INVALID_UUIDS = (
    "",
    "not-a-uuid",
    "00000000-0000-0000-0000-00000000000g",
    "00000000-0000-0000-0000-0000000000000",
    "0000000-0000-0000-0000-000000000000",
    "12345678-1234-1234-1234-123456789abc\x00",
    "12345678-1234-1234-1234-123456789abc ",
    "\u202e12345678-1234-1234-1234-123456789abc",
    "\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18-1234-1234-1234-123456789abc",  # full-width
    "' OR 1=1 --",
    "../../etc/passwd",
    "null",
)
ODD_UUIDS = (  # spellings that are UUIDs to some parsers and not to others
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "12345678123412341234123456789abc",
    "{12345678-1234-1234-1234-123456789abc}",
    "urn:uuid:12345678-1234-1234-1234-123456789abc",
    "12345678-1234-1234-1234-123456789ABC",
)
UNICODE_EDGES = (
    "\ud800",  # lone high surrogate (sent escaped as \ud800)
    "\udfff",  # lone low surrogate
    "a\ud83dz",  # half an emoji
    "\x00",
    "nul\x00inside",
    "\u202eevil RTL override",
    "\u200fright-to-left mark\u200f",
    "\u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627",  # Hebrew + Arabic
    "\ufeffBOM first",
    "\uffff\ufffe",  # non-characters
    "\U0001f600\U0001f4a9",
    "e\u0301" * 50,  # combining marks
    "line\u2028separator\u2029",
    "\x1b[31mANSI\x1b[0m",
    "<script>alert(1)</script>",
    "{{order_id}}",
    "   ",
    "\t\n\r",
)
HUGE_NUMBERS: tuple[int | float, ...] = (
    2**31,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63) - 1,
    10**30,
    -(10**30),
    10**300,
    1e308,
    -1e308,
    5e-324,
    float("inf"),
    float("-inf"),
    float("nan"),
    0,
    -1,
)


def json_scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.sampled_from(HUGE_NUMBERS),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=20),
        st.text(st.characters(categories=["Cs", "Cc", "Cf", "Co"]), max_size=5),
        st.sampled_from(UNICODE_EDGES + INVALID_UUIDS + ODD_UUIDS + UNKNOWN_TYPES),
        st.uuids().map(str),
    )


def json_values() -> st.SearchStrategy[Any]:
    """Any JSON value (plus NaN/Infinity, which Python's json accepts)."""
    return st.recursive(
        json_scalars(),
        lambda children: st.one_of(
            st.lists(children, max_size=3),
            st.dictionaries(
                st.sampled_from(FIELD_NAMES) | st.text(max_size=8), children, max_size=3
            ),
        ),
        max_leaves=6,
    )


def deep_nesting() -> st.SearchStrategy[Hostile]:
    """Valid JSON nested far beyond any sane depth, still under CHAT_MAX_FRAME_BYTES."""

    @st.composite
    def build(draw: st.DrawFn) -> Hostile:
        depth = draw(st.sampled_from((50, 500, 990, 1_100, 5_000, 20_000)))
        shape = draw(st.sampled_from(("list", "object", "in_field")))
        if shape == "list":
            return Hostile(text="[" * depth + "]" * depth)
        if shape == "object":
            depth = min(depth, (MAX_FRAME_BYTES - 10) // 6)
            return Hostile(text='{"a":' * depth + "1" + "}" * depth)
        depth = min(depth, (MAX_FRAME_BYTES - 200) // 2)
        field = draw(st.sampled_from(("text", "id", "type", "template", "variables")))
        head = f'{{"type":"chat.send","id":"{uuid.UUID(int=depth)}","conversation_id":null,'
        return Hostile(text=head + f'"{field}":' + "[" * depth + "]" * depth + "}")

    return build()


def oversized() -> st.SearchStrategy[Hostile]:
    @st.composite
    def build(draw: st.DrawFn) -> Hostile:
        extra = draw(st.integers(min_value=1, max_value=4_000))
        shape = draw(st.sampled_from(("raw", "send", "multibyte", "binary")))
        if shape == "raw":
            return Hostile(text="x" * (MAX_FRAME_BYTES + extra))
        if shape == "binary":
            return Hostile(data=b"\xff" * (MAX_FRAME_BYTES + extra))
        frame = {"type": "chat.send", "id": str(uuid.UUID(int=extra)), "conversation_id": None}
        if shape == "send":
            return as_json({**frame, "text": "y" * (MAX_FRAME_BYTES + extra)})
        # fewer characters than the limit, more bytes: the limit is in bytes
        return as_json({**frame, "text": "\u00e9" * (MAX_FRAME_BYTES // 2 + extra)}, False)

    return build()


RAW_TEXTS = (
    "",
    " ",
    "{not json",
    "{'type': 'chat.send'}",
    '{"type":"chat.send",}',
    '{"type":"chat.send"',
    "null",
    "true",
    "0",
    "-0",
    "1" + "0" * 5_000,  # more digits than Python's int parser allows
    "1e999999",
    "NaN",
    "-Infinity",
    '"chat.send"',
    "[]",
    "{}",
    '{"type":"chat.stop","type":"chat.send","id":"12345678-1234-1234-1234-123456789abc"}',
    '{"type":"chat.send","id":"12345678-1234-1234-1234-123456789abc","text":"\\ud800"}',
    '{"type":"chat.send","id":"12345678-1234-1234-1234-123456789abc","text":"\\u0000"}',
    '\ufeff{"type":"chat.stop","id":"12345678-1234-1234-1234-123456789abc"}',
    '{"type":"chat.stop","id":"12345678-1234-1234-1234-123456789abc"}\x00',
    '{"type":"chat.stop","id":"12345678-1234-1234-1234-123456789abc"} {}',
    '{"type":"chat.stop","id":"12345678-1234-1234-1234-123456789abc"}\n',
)


def raw_frames() -> st.SearchStrategy[Hostile]:
    """Text that may or may not be JSON, binary, JSON of any shape, nesting, oversize."""
    return st.one_of(
        st.text(max_size=200).map(lambda t: Hostile(text=t)),
        st.binary(max_size=200).map(lambda b: Hostile(data=b)),
        st.sampled_from(RAW_TEXTS).map(lambda t: Hostile(text=t)),
        st.builds(as_json, json_values(), st.booleans()),
        deep_nesting(),
        oversized(),
    )


def message_refs(world: World) -> st.SearchStrategy[str]:
    """Message/conversation ids: someone else's, one's own, or nobody's."""
    return st.one_of(
        st.sampled_from(
            (world.bob_answer, world.bob_conversation, world.alice_answer, world.alice_conversation)
        ),
        st.uuids().map(str),
    )


def valid_frames(world: World) -> st.SearchStrategy[Frame]:
    ids = st.uuids().map(str)
    refs = message_refs(world)
    texts = st.one_of(
        st.text(min_size=1, max_size=60),
        st.sampled_from(UNICODE_EDGES),
        st.just("x" * (MAX_MESSAGE_CHARS + 1)),
    )
    send = st.fixed_dictionaries(
        {
            "type": st.just("chat.send"),
            "id": ids,
            "conversation_id": st.none() | refs,
            "text": texts,
        }
    )
    stop = st.fixed_dictionaries(
        {"type": st.just("chat.stop"), "id": ids}, optional={"message_id": st.none() | refs}
    )
    regenerate = st.fixed_dictionaries(
        {"type": st.just("chat.regenerate"), "id": ids, "message_id": refs},
        optional={"bypass_faq": st.booleans()},
    )
    feedback = st.fixed_dictionaries(
        {
            "type": st.just("chat.feedback"),
            "id": ids,
            "message_id": refs,
            "rating": st.sampled_from(("up", "down")),
        }
    )
    templated = template_frames(world)
    kinds: list[st.SearchStrategy[Frame]] = [
        send,
        send,
        regenerate,
        feedback,
        stop,
        templated,
        templated,
    ]
    if "chat.resume" in CLIENT_FRAME_TYPES:  # reconnect-and-resume, where the server has it
        kinds.append(
            st.fixed_dictionaries(
                {"type": st.just("chat.resume"), "id": ids, "message_id": refs},
                optional={"last_seq": st.integers() | st.sampled_from(HUGE_NUMBERS)},
            )
        )
    return st.one_of(kinds)


def template_frames(world: World) -> st.SearchStrategy[Frame]:
    """Templated sends: good and bogus references, variables, patches and hashes."""
    good_ref = {
        "id": world.template_id,
        "version": world.template_version,
        "sha256": world.template_sha256,
    }
    refs = st.one_of(
        st.just(good_ref),
        st.just(good_ref),
        st.fixed_dictionaries(
            {
                "id": st.sampled_from((world.template_id, world.template_id + 1, 1, 2**31, 2**63)),
                "version": st.sampled_from((world.template_version, 2, 10**6, 2**63 - 1)),
                "sha256": st.sampled_from(
                    (world.template_sha256, "0" * 64, "f" * 64, world.template_sha256.upper())
                ),
            }
        ),
    )
    edited = RENDERED.replace("refund", "refund, quickly")
    patches = st.one_of(
        st.just(make_patch(base=RENDERED, edited=edited)),
        st.sampled_from(
            (
                "",
                "garbage",
                "@@ -1,4 +1,4 @@\n-xxxx\n+yyyy\n",
                "@@ -999999,1 +999999,1 @@\n-a\n+b\n",
                "@@ -1 +1 @@\n+%ZZ\n",
                "x" * 16_001,
            )
        ),
        st.text(max_size=40),
    )
    variables = st.one_of(
        st.just(VALUES),
        st.fixed_dictionaries(
            {
                "order_id": st.one_of(
                    st.text(max_size=25), st.integers(), st.sampled_from(UNICODE_EDGES)
                ),
                "remedy": st.sampled_from(("refund", "replacement", "cash", "")),
            }
        ),
        st.dictionaries(st.text(max_size=8), st.text(max_size=8) | st.integers(), max_size=3),
    )
    hashes = st.one_of(
        st.just(sha256_hex(edited)),
        st.just(sha256_hex(RENDERED)),
        st.sampled_from(("0" * 64, "A" * 64, "g" * 64, "")),
    )
    texts = st.one_of(st.just(edited), st.text(min_size=1, max_size=30))
    # coherent shapes (what a browser sends) with bogus parts, and the fields at random
    shapes = st.one_of(
        st.fixed_dictionaries({"variables": variables}),
        st.fixed_dictionaries({"variables": variables, "patch": patches, "result_sha256": hashes}),
        st.fixed_dictionaries({"text": texts}, optional={"result_sha256": hashes}),
        st.fixed_dictionaries(
            {},
            optional={
                "variables": variables,
                "patch": patches,
                "result_sha256": hashes,
                "text": texts,
            },
        ),
    )
    return st.builds(
        lambda frame_id, ref, extra: {
            "type": "chat.send",
            "id": frame_id,
            "conversation_id": None,
            "template": ref,
            **extra,
        },
        st.uuids().map(str),
        refs,
        shapes,
    )


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[Frame]) -> Frame:
    """A valid frame with 0-3 changes: a field dropped, replaced by any JSON, or added."""
    frame = dict(draw(base))
    for _ in range(draw(st.sampled_from((0, 0, 1, 1, 2, 3)))):  # often valid, often not
        op = draw(st.sampled_from(("drop", "replace", "add", "retype", "nest")))
        keys = sorted(frame)
        if op == "drop" and keys:
            del frame[draw(st.sampled_from(keys))]
        elif op == "replace" and keys:
            frame[draw(st.sampled_from(keys))] = draw(json_values())
        elif op == "add":
            frame[draw(st.sampled_from(FIELD_NAMES) | st.text(max_size=12))] = draw(json_values())
        elif op == "retype":
            frame["type"] = draw(
                st.sampled_from(UNKNOWN_TYPES + tuple(sorted(CLIENT_FRAME_TYPES)))
                | json_scalars()
                | st.lists(json_scalars(), max_size=2)
            )
        elif op == "nest" and isinstance(frame.get("template"), dict):
            template = dict(frame["template"])
            template[draw(st.sampled_from(("id", "version", "sha256", "extra")))] = draw(
                json_values()
            )
            frame["template"] = template
    return frame


def frame_batches(item: st.SearchStrategy[Hostile]) -> st.SearchStrategy[list[Hostile]]:
    return st.lists(item, min_size=1, max_size=3)


def _frames_of(
    world: World, base: Callable[[World], st.SearchStrategy[Frame]]
) -> st.SearchStrategy[list[Hostile]]:
    return frame_batches(st.builds(as_json, mutated(base(world)), st.booleans()))


# ---- the properties ---------------------------------------------------------------------


@settings(FUZZ, max_examples=90)
@given(data=st.data())
async def test_raw_text_binary_and_arbitrary_json_get_typed_errors(
    connect: Connect, world: World, data: st.DataObject
) -> None:
    await run_example(connect, world, data.draw(frame_batches(raw_frames()), label="frames"))


@settings(FUZZ, max_examples=100)
@given(data=st.data())
async def test_mutated_client_frames_get_a_typed_answer(
    connect: Connect, world: World, data: st.DataObject
) -> None:
    await run_example(connect, world, data.draw(_frames_of(world, valid_frames), label="frames"))


@settings(FUZZ, max_examples=40)
@given(data=st.data())
async def test_templated_sends_with_bogus_references_get_a_typed_answer(
    connect: Connect, world: World, data: st.DataObject
) -> None:
    await run_example(connect, world, data.draw(_frames_of(world, template_frames), label="frames"))


# ---- named hostile frames, each checked on every run -----------------------------------

CLIENT_ID = "12345678-1234-1234-1234-123456789abc"


def _named_cases() -> list[Any]:
    def send(**fields: Any) -> Hostile:
        return as_json({"type": "chat.send", "id": CLIENT_ID, "conversation_id": None, **fields})

    cases: dict[str, Hostile] = {
        "binary": Hostile(data=b"\x00\x01\xff"),
        "binary_json": Hostile(data=b'{"type":"chat.stop","id":"' + CLIENT_ID.encode() + b'"}'),
        "oversized_raw": Hostile(text="x" * (MAX_FRAME_BYTES + 1)),
        "oversized_multibyte": send(text="\u00e9" * (MAX_FRAME_BYTES // 2 + 1)),
        "not_json": Hostile(text="{not json"),
        "empty": Hostile(text=""),
        "too_many_digits": Hostile(text="1" + "0" * 5_000),
        "list": as_json([1, 2, 3]),
        "number": as_json(42),
        "string": as_json("chat.send"),
        "null": as_json(None),
        "nan": Hostile(text="NaN"),
        "unknown_type": as_json({"type": "chat.dance", "id": CLIENT_ID}),
        "worker_type": as_json({"type": "inference.generate", "id": CLIENT_ID}),
        "handler_type": as_json({"type": "chat.watchdog", "request_id": "x"}),
        "type_int": as_json({"type": 1, "id": CLIENT_ID}),
        "type_list": as_json({"type": [], "id": CLIENT_ID}),
        "type_object": as_json({"type": {"chat.send": 1}, "id": CLIENT_ID}),
        "extra_field": send(text="hi", admin=True),
        "id_int": as_json({"type": "chat.send", "id": 7, "text": "hi"}),
        "id_invalid": send(text="hi", id="not-a-uuid"),
        "text_list": send(text=["hi"]),
        "text_huge_number": send(text=10**300),
        "text_empty": send(text=""),
        "text_too_long": send(text="x" * (MAX_MESSAGE_CHARS + 1)),
        "text_nul": send(text="nul\x00inside"),
        "text_rtl": send(text="\u202eevil \u200f\u05e9\u05dc\u05d5\u05dd"),
        "text_nan": as_json({"type": "chat.send", "id": CLIENT_ID, "text": float("nan")}),
        "conversation_nobody": send(text="hi", conversation_id=str(uuid.UUID(int=1))),
        "stop_idle": as_json({"type": "chat.stop", "id": CLIENT_ID}),
        "stop_nobody": as_json(
            {"type": "chat.stop", "id": CLIENT_ID, "message_id": str(uuid.UUID(int=2))}
        ),
        "regenerate_nobody": as_json(
            {"type": "chat.regenerate", "id": CLIENT_ID, "message_id": str(uuid.UUID(int=3))}
        ),
        "feedback_nobody": as_json(
            {
                "type": "chat.feedback",
                "id": CLIENT_ID,
                "message_id": str(uuid.UUID(int=4)),
                "rating": "up",
            }
        ),
        "feedback_bad_rating": as_json(
            {
                "type": "chat.feedback",
                "id": CLIENT_ID,
                "message_id": str(uuid.UUID(int=4)),
                "rating": "meh",
            }
        ),
        "regenerate_bypass_string": as_json(
            {
                "type": "chat.regenerate",
                "id": CLIENT_ID,
                "message_id": str(uuid.UUID(int=3)),
                "bypass_faq": "yes please",
            }
        ),
        "template_unknown": send(template={"id": 999_999, "version": 1, "sha256": "0" * 64}),
        "template_negative": send(template={"id": -1, "version": 1, "sha256": "0" * 64}),
        "template_sha_not_hex": send(template={"id": 1, "version": 1, "sha256": "z" * 64}),
        "template_is_string": send(template="1"),
        "text_lone_high_surrogate": send(text="\ud800"),
        "text_lone_low_surrogate": send(text="x\udfffy"),
        "text_half_emoji": send(text="a\ud83dz"),
        "text_bom_and_noncharacters": send(text="\ufeff\uffff\ufffe"),
        "type_lone_surrogate": as_json({"type": "chat.\ud800", "id": CLIENT_ID}),
        "key_lone_surrogate": send(text="hi", **{"\ud800": 1}),
        "id_lone_surrogate": send(text="hi", id="\ud800"),
        "id_braces": send(text="hi", id="{" + CLIENT_ID + "}"),
        "id_huge_number": send(text="hi", id=10**300),
        "conversation_id_huge_number": send(text="hi", conversation_id=2**64),
        "message_id_float": as_json(
            {"type": "chat.feedback", "id": CLIENT_ID, "message_id": 1e308, "rating": "up"}
        ),
        "template_big_id": send(template={"id": 2**63 - 1, "version": 1, "sha256": "0" * 64}),
        "template_huge_version": send(
            template={"id": 1, "version": 10**30, "sha256": "0" * 64}, variables={}
        ),
        "template_huge_variable": send(
            template={"id": 1, "version": 1, "sha256": "0" * 64}, variables={"n": 10**300}
        ),
        "deep_list_50": Hostile(text="[" * 50 + "]" * 50),
        "deep_list_700": Hostile(text="[" * 700 + "]" * 700),
        "deep_list_1000": Hostile(text="[" * 1000 + "]" * 1000),
        "deep_object_10000": Hostile(text='{"a":' * 10_000 + "1" + "}" * 10_000),
        "template_id_2_63": send(template={"id": 2**63, "version": 1, "sha256": "0" * 64}),
        "template_version_2_63": send(template={"id": 1, "version": 2**63, "sha256": "0" * 64}),
        "deep_in_field_50": Hostile(
            text=f'{{"type":"chat.send","id":"{CLIENT_ID}","text":' + "[" * 50 + "]" * 50 + "}"
        ),
    }
    return [pytest.param(hostile, id=name) for name, hostile in cases.items()]


@pytest.mark.parametrize("hostile", _named_cases())
async def test_named_hostile_frames(connect: Connect, world: World, hostile: Hostile) -> None:
    await run_example(connect, world, [hostile])


def _world_cases() -> list[Any]:
    """Frames aimed at the other user's data, resolved against the world at run time."""

    def stop(w: World) -> Frame:
        return {"type": "chat.stop", "id": CLIENT_ID, "message_id": w.bob_answer}

    def regenerate(w: World) -> Frame:
        return {"type": "chat.regenerate", "id": CLIENT_ID, "message_id": w.bob_answer}

    def feedback(w: World) -> Frame:
        return {
            "type": "chat.feedback",
            "id": CLIENT_ID,
            "message_id": w.bob_answer,
            "rating": "down",
        }

    def follow_up(w: World) -> Frame:
        return {
            "type": "chat.send",
            "id": CLIENT_ID,
            "conversation_id": w.bob_conversation,
            "text": "let me in",
        }

    def regenerate_a_question(w: World) -> Frame:  # a conversation id where a message goes
        return {"type": "chat.regenerate", "id": CLIENT_ID, "message_id": w.alice_conversation}

    def template_bad_hash(w: World) -> Frame:
        return {
            "type": "chat.send",
            "id": CLIENT_ID,
            "conversation_id": None,
            "template": {"id": w.template_id, "version": w.template_version, "sha256": "0" * 64},
            "variables": VALUES,
        }

    def template_bad_patch(w: World) -> Frame:
        return {
            "type": "chat.send",
            "id": CLIENT_ID,
            "conversation_id": None,
            "template": {
                "id": w.template_id,
                "version": w.template_version,
                "sha256": w.template_sha256,
            },
            "variables": VALUES,
            "patch": "@@ -1,4 +1,4 @@\n-xxxx\n+yyyy\n",
            "result_sha256": "0" * 64,
        }

    def template_huge_patch(w: World) -> Frame:
        return {**template_bad_patch(w), "patch": "x" * 16_001}

    def template_follow_up(w: World) -> Frame:
        return {**template_bad_hash(w), "conversation_id": w.alice_conversation}

    def template_unknown_variable(w: World) -> Frame:
        frame = template_bad_hash(w)
        frame["template"]["sha256"] = w.template_sha256
        return {**frame, "variables": {**VALUES, "surprise": "x"}}

    def template_variable_too_long(w: World) -> Frame:
        frame = template_unknown_variable(w)
        return {**frame, "variables": {**VALUES, "order_id": "9" * 21}}

    def resume_bobs_answer(w: World) -> Frame:
        return {"type": "chat.resume", "id": CLIENT_ID, "message_id": w.bob_answer}

    def resume_own_answer(w: World) -> Frame:
        return {"type": "chat.resume", "id": CLIENT_ID, "message_id": w.alice_answer}

    builders: list[Callable[[World], Frame]] = [
        resume_bobs_answer,
        resume_own_answer,
        stop,
        regenerate,
        feedback,
        follow_up,
        regenerate_a_question,
        template_bad_hash,
        template_bad_patch,
        template_huge_patch,
        template_follow_up,
        template_unknown_variable,
        template_variable_too_long,
    ]
    return [pytest.param(b, id=b.__name__) for b in builders]


# the first reply's frame type, or its error code
WORLD_EXPECTED: dict[str, frozenset[str]] = {
    "resume_bobs_answer": frozenset({"not_found"}),
    "resume_own_answer": frozenset({"chat.snapshot", "chat.delta", "chat.done"}),
    "stop": frozenset({"not_found"}),
    "regenerate": frozenset({"not_found"}),
    "feedback": frozenset({"not_found"}),
    "follow_up": frozenset({"not_found"}),
    "regenerate_a_question": frozenset({"not_found"}),
    "template_bad_hash": frozenset({"chat.resend_full"}),
    "template_bad_patch": frozenset({"chat.resend_full"}),
    "template_huge_patch": frozenset({"too_large"}),
    "template_follow_up": frozenset({"invalid"}),
    "template_unknown_variable": frozenset({"invalid"}),
    "template_variable_too_long": frozenset({"too_large"}),
}


@pytest.mark.parametrize("build", _world_cases())
async def test_frames_aimed_at_other_users_and_bogus_templates(
    connect: Connect, world: World, build: Callable[[World], Frame]
) -> None:
    frame = build(world)
    if frame["type"] not in CLIENT_FRAME_TYPES:
        pytest.skip(f"this protocol has no {frame['type']}")
    hostile = as_json(frame)
    ws = await open_socket(connect, world.alice)
    before = await sync_to_async(_bob_state)(world)
    replies = await exchange(ws, hostile)
    check_replies(hostile, replies, world)
    first = replies[0]
    got = first["code"] if first["type"] == "chat.error" else first["type"]
    assert got in WORLD_EXPECTED[build.__name__], replies
    await check_still_usable(ws)
    assert await sync_to_async(_bob_state)(world) == before
