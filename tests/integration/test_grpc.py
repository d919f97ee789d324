"""The gRPC Chat service (`python -m chatapp.grpc_api`) as real processes: Redis, a scripted
inference worker, the gRPC process and a web process for /v1, over one SQLite database.

The scripted engine answers "You said: <question>" token by token (slowly with "[[slow]]"
in the question), so what a stream shows can be compared exactly with what was stored.
"""

from __future__ import annotations

import queue
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from chatapp.grpc_api.generated import chat_pb2, chat_pb2_grpc
from tests.integration.processes import (
    MANAGE,
    REPO_ROOT,
    api_key_made,
    keep_draining,
    local_env,
    manage_run,
    processes_stop,
    repo_process,
    wait_for_line,
    wait_until,
)
from tests.support.net import free_port

pytestmark = pytest.mark.redis


@dataclass(frozen=True)
class Stack:
    target: str  # host:port of the gRPC service
    web: str  # http://127.0.0.1:PORT
    database: Path
    key: str
    env: dict[str, str]

    def stored(self, message_id: str) -> dict[str, str]:
        """The stored answer once it has ended (its row is written as the end is streamed)."""
        return dict(
            wait_until(
                f"message {message_id} stored as ended",
                lambda: (row := self._row(message_id)) and row["status"] != "streaming" and row,
                timeout=10,
            )
        )

    def _row(self, message_id: str) -> dict[str, str]:
        with sqlite3.connect(self.database) as db:
            db.row_factory = sqlite3.Row
            row = db.execute(
                "SELECT status, finish_reason, content FROM conversations_message WHERE id = ?",
                (message_id.replace("-", ""),),
            ).fetchone()
        return dict(row) if row is not None else {}


def stack_running(data: Path, engine: dict[str, str], *, redis_db: int) -> Iterator[Stack]:
    """Redis (flushed), a worker on `engine`, the gRPC process and a web process, with a key."""
    import redis

    redis_url = f"redis://127.0.0.1:6379/{redis_db}"
    try:
        redis.Redis.from_url(redis_url).flushdb()
    except redis.ConnectionError as exc:
        pytest.fail(f"this test needs Redis on 127.0.0.1:6379 (.ci/run starts it): {exc}")
    env = local_env(
        data, {"REDIS_URL": redis_url, "INFERENCE_FAQ": "0", "CHAT_FAQ_ENABLED": "0", **engine}
    )
    manage_run(env, ["migrate", "--noinput"])
    grpc_port, web_port = free_port(), free_port()
    worker = repo_process([sys.executable, "-m", "inference"], env)
    service = repo_process(
        [sys.executable, "-m", "chatapp.grpc_api", "--port", str(grpc_port)], env
    )
    web = repo_process([*MANAGE, "serve", "--port", str(web_port), "--no-worker"], env)
    procs = [worker, service, web]
    try:
        wait_for_line(worker, r"Inference worker ready", 300)
        wait_for_line(service, rf"gRPC Chat service on 127\.0\.0\.1:{grpc_port}", 60)
        wait_for_line(web, rf"Serving on http://127\.0\.0\.1:{web_port}/", 60)
        for proc in procs:
            keep_draining(proc)
        yield Stack(
            target=f"127.0.0.1:{grpc_port}",
            web=f"http://127.0.0.1:{web_port}",
            database=data / "db.sqlite3",
            key=key_made(env, name="grpc"),
            env=env,
        )
    finally:
        processes_stop(procs, timeout=20)


def key_made(env: dict[str, str], *, name: str, max_concurrent: int = 8) -> str:
    return api_key_made(env, name=name, username="grpc-client", max_concurrent=max_concurrent)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from stack_running(
        tmp_path_factory.mktemp("grpc"), {"INFERENCE_ENGINE": "scripted"}, redis_db=12
    )


@pytest.fixture(scope="module")
def real_stack(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    engine = {
        "INFERENCE_ENGINE": "vllm",
        "MODEL": str(tiny_model),
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_MAX_MODEL_LEN": "2048",
        "VLLM_CACHE_ROOT": str(tiny_model.parent.parent / "cache" / "vllm"),
    }
    yield from stack_running(tmp_path_factory.mktemp("grpc-vllm"), engine, redis_db=10)


@dataclass
class Stream:
    """One Chat stream: events go in through a queue, server events are read as they come."""

    stack: Stack
    key: str | None = None
    timeout_s: float = 60
    outbox: queue.Queue[chat_pb2.ClientEvent | None] = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        self.channel = grpc.insecure_channel(self.stack.target)
        stub = chat_pb2_grpc.ChatStub(self.channel)  # type: ignore[no-untyped-call]  # protoc's
        key = self.stack.key if self.key is None else self.key
        metadata = [("authorization", f"Bearer {key}")] if key else []
        self.call = stub.Chat(
            iter(self.outbox.get, None), metadata=metadata, timeout=self.timeout_s
        )

    def put(self, **event: object) -> None:
        self.outbox.put(chat_pb2.ClientEvent(**event))  # type: ignore[arg-type]

    def next(self) -> chat_pb2.ServerEvent:
        event: chat_pb2.ServerEvent = next(self.call)
        return event

    def until_end(self) -> list[chat_pb2.ServerEvent]:
        """Server events up to and including the answer's Done or Error."""
        seen = []
        while True:
            event = self.next()
            seen.append(event)
            if event.WhichOneof("event") in ("done", "error"):
                return seen

    def close(self) -> None:
        self.outbox.put(None)
        self.channel.close()


def text_of(events: list[chat_pb2.ServerEvent]) -> str:
    return "".join(e.delta.text for e in events if e.WhichOneof("event") == "delta")


def send(text: str, client_id: str = "") -> chat_pb2.Send:
    return chat_pb2.Send(client_id=client_id, text=text)


def test_an_answer_streams_and_equals_the_stored_one(stack: Stack) -> None:
    stream = Stream(stack)
    try:
        stream.put(send=send("where is my order", client_id=str(uuid.uuid4())))
        events = stream.until_end()
    finally:
        stream.close()
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[0] == "accepted"
    assert kinds[-1] == "done"
    assert kinds.count("delta") > 2  # streamed token by token, not one block
    seqs = [e.delta.seq for e in events if e.WhichOneof("event") == "delta"]
    assert seqs == list(range(1, len(seqs) + 1))
    done = events[-1].done
    assert (done.status, done.finish_reason, done.source) == ("complete", "stop", "model")
    assert done.usage.completion_tokens == len(seqs)
    assert text_of(events) == "You said: where is my order"
    stored = stack.stored(events[0].accepted.message_id)
    assert stored == {"status": "complete", "finish_reason": "stop", "content": text_of(events)}


def test_one_stream_is_a_conversation_with_edit_and_regenerate(stack: Stack) -> None:
    stream = Stream(stack)
    try:
        stream.put(send=send("first question"))
        first = stream.until_end()
        stream.put(send=send("second question"))
        second = stream.until_end()
        stream.put(edit=chat_pb2.Edit(text="second, edited"))
        edited = stream.until_end()
        stream.put(regenerate=chat_pb2.Regenerate())
        again = stream.until_end()
    finally:
        stream.close()
    assert [text_of(e) for e in (first, second, edited, again)] == [
        "You said: first question",
        "You said: second question",
        "You said: second, edited",
        "You said: second, edited",
    ]
    ids = {e[0].accepted.message_id for e in (first, second, edited, again)}
    assert len(ids) == 4  # each answer is stored on its own


def test_stop_mid_answer_aborts_it_and_keeps_its_text(stack: Stack) -> None:
    stream = Stream(stack)
    try:
        stream.put(send=send("[[slow]] " + "tell me everything " * 20))
        accepted = stream.next()
        first = stream.next()
        assert first.WhichOneof("event") == "delta"
        stream.put(stop=chat_pb2.Stop())
        rest = stream.until_end()
    finally:
        stream.close()
    done = rest[-1].done
    assert (done.status, done.finish_reason) == ("stopped", "abort")
    shown = first.delta.text + text_of(rest)
    assert len(shown) < len("You said: [[slow]] " + "tell me everything " * 20)
    stored = stack.stored(accepted.accepted.message_id)
    assert (stored["status"], stored["content"]) == ("stopped", shown)


def test_a_deadline_that_runs_out_mid_answer_stops_it(stack: Stack) -> None:
    stream = Stream(stack, timeout_s=1.5)
    stream.put(send=send("[[slow]] " + "a very long answer " * 30, client_id=str(uuid.uuid4())))
    accepted = stream.next().accepted
    with pytest.raises(grpc.RpcError) as ended:
        while True:
            stream.next()
    stream.close()
    assert ended.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    stored = stack.stored(accepted.message_id)
    assert stored["status"] == "stopped"
    assert stored["finish_reason"] == "abort"
    assert 0 < len(stored["content"]) < len("You said: [[slow]] " + "a very long answer " * 30)


def test_resume_after_a_dropped_connection_loses_and_doubles_nothing(stack: Stack) -> None:
    client_id = str(uuid.uuid4())
    question = ("[[slow]] a long answer please " * 4).strip()
    stream = Stream(stack)
    stream.put(send=send(question, client_id=client_id))
    accepted = stream.next().accepted
    before = [stream.next() for _ in range(3)]
    stream.call.cancel()  # the connection drops mid-answer
    stream.close()
    after_seq = before[-1].delta.seq
    resumed = Stream(stack)
    try:
        resumed.put(resume=chat_pb2.Resume(client_id=client_id, after_seq=after_seq))
        rest = resumed.until_end()
    finally:
        resumed.close()
    seqs = [e.delta.seq for e in rest if e.WhichOneof("event") == "delta"]
    assert seqs[0] == after_seq + 1
    assert rest[-1].done.status == "complete"
    whole = text_of(before) + text_of(rest)
    assert whole == f"You said: {question}"
    assert stack.stored(accepted.message_id)["content"] == whole


def test_without_a_key_the_stream_is_refused(stack: Stack) -> None:
    for key in ("", "ick_00000000_not-a-key"):
        stream = Stream(stack, key=key)
        stream.put(send=send("hello"))
        with pytest.raises(grpc.RpcError) as refused:
            stream.next()
        stream.close()
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "API key" in (refused.value.details() or "")


@pytest.mark.parametrize(
    ("event", "said"),
    [
        (chat_pb2.ClientEvent(), "needs one of send, stop"),
        (chat_pb2.ClientEvent(send=send("x" * 9000)), "limited to 8000 characters"),
        (chat_pb2.ClientEvent(regenerate=chat_pb2.Regenerate()), "no earlier message"),
        (chat_pb2.ClientEvent(resume=chat_pb2.Resume(client_id="never-sent")), "never-sent"),
    ],
)
def test_a_bad_event_gets_invalid_argument_with_a_message(
    stack: Stack, event: chat_pb2.ClientEvent, said: str
) -> None:
    stream = Stream(stack)
    stream.outbox.put(event)
    with pytest.raises(grpc.RpcError) as refused:
        stream.next()
    stream.close()
    assert refused.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND)
    assert said in (refused.value.details() or "")


@pytest.mark.parametrize("engine", ["scripted", pytest.param("vllm", marks=pytest.mark.vllm)])
def test_grpc_and_v1_give_the_same_tokens_with_the_same_seed(
    request: pytest.FixtureRequest, engine: str
) -> None:
    """Sampled (temperature 0.7), not greedy: the same seed must reach the engine both ways."""
    stack: Stack = request.getfixturevalue("stack" if engine == "scripted" else "real_stack")
    body = {
        "model": "scripted",
        "messages": [{"role": "user", "content": "same question"}],
        "seed": 7,
        "temperature": 0.7,
    }
    models = httpx.get(
        f"{stack.web}/v1/models", headers={"Authorization": f"Bearer {stack.key}"}, timeout=30
    )
    body["model"] = models.json()["data"][0]["id"]
    over_v1 = httpx.post(
        f"{stack.web}/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {stack.key}"},
        timeout=60,
    ).json()["choices"][0]["message"]["content"]
    stream = Stream(stack)
    try:
        sampling = chat_pb2.Sampling(seed=7, temperature=0.7)
        stream.put(send=chat_pb2.Send(text="same question", sampling=sampling))
        over_grpc = text_of(stream.until_end())
    finally:
        stream.close()
    assert over_grpc == over_v1
    assert over_grpc  # some text
    if engine == "scripted":
        assert over_grpc == "You said: same question"


def test_health_and_reflection_answer(stack: Stack) -> None:
    with grpc.insecure_channel(stack.target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "instantchat.v1.Chat"):
            reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

        reflect = reflection_pb2_grpc.ServerReflectionStub(channel)
        ask = reflection_pb2.ServerReflectionRequest(list_services="")
        listed = next(iter(reflect.ServerReflectionInfo(iter([ask]), timeout=10)))
        names = {s.name for s in listed.list_services_response.service}
        assert {"instantchat.v1.Chat", "grpc.health.v1.Health"} <= names


def test_overload_is_resource_exhausted_with_retry_after(stack: Stack) -> None:
    """A key at its concurrency limit: the next Send ends RESOURCE_EXHAUSTED, with /v1's code
    and the seconds to wait in the trailing metadata."""
    key = key_made(stack.env, name="one-at-a-time", max_concurrent=1)
    busy = Stream(stack, key=key)
    other = Stream(stack, key=key)
    try:
        busy.put(send=send("[[slow]] " + "keep going " * 40))
        busy.next()  # accepted
        busy.next()  # a delta: it is generating
        other.put(send=send("and me?"))
        with pytest.raises(grpc.RpcError) as refused:
            other.next()
        busy.put(stop=chat_pb2.Stop())
        busy.until_end()
    finally:
        busy.close()
        other.close()
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    trailing = {m.key: str(m.value) for m in refused.value.trailing_metadata() or ()}
    assert trailing["error-code"] == "concurrency_limit_exceeded"
    assert int(trailing["retry-after"]) >= 1


def test_another_key_cannot_resume_or_see_an_answer(stack: Stack) -> None:
    """A resume names an answer by the client_id its key sent: another key's same client_id
    is another answer, so a stranger's resume finds nothing (docs/security.md)."""
    client_id = str(uuid.uuid4())
    owner = Stream(stack)
    try:
        owner.put(send=send("my private question", client_id=client_id))
        owner.until_end()
    finally:
        owner.close()
    stranger = Stream(stack, key=key_made(stack.env, name="stranger"))
    stranger.put(resume=chat_pb2.Resume(client_id=client_id))
    with pytest.raises(grpc.RpcError) as refused:
        stranger.next()
    stranger.close()
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    assert "private" not in (refused.value.details() or "")


_PUBLISH = """
from django.db import transaction
from chatapp.prompts.models import PromptTemplate
from chatapp.prompts.services import template_publish
with transaction.atomic():
    t = PromptTemplate.objects.create(
        name="grpc order",
        system_prompt="You are the support assistant of Example Shop.",
        body="My order {{order_id}} has not arrived.",
        variables=[{"name": "order_id", "label": "Order", "type": "string", "max_length": 20}],
        sampling={"max_tokens": 40},
    )
    v = template_publish(template=t, user=None, warm=False)
print(t.pk, v.version, v.pk)
"""


def test_a_template_by_reference_starts_the_streams_conversation(stack: Stack) -> None:
    published = subprocess.run(
        [*MANAGE, "shell", "-c", _PUBLISH],
        env=stack.env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    template_id, version, version_pk = (int(value) for value in published[-3:])
    ref = chat_pb2.TemplateRef(id=template_id, version=version, variables={"order_id": "A-1042"})
    stream = Stream(stack)
    try:
        stream.put(send=chat_pb2.Send(template=ref))  # the template's body is the question
        first = stream.until_end()
        stream.put(send=send("Any news?"))  # goes on in the template's conversation
        second = stream.until_end()
    finally:
        stream.close()
    assert text_of(first) == "You said: My order A-1042 has not arrived."
    assert text_of(second) == "You said: Any news?"
    with sqlite3.connect(stack.database) as db:
        versions = [
            db.execute(
                "SELECT c.template_version_id FROM conversations_message m "
                "JOIN conversations_conversation c ON c.id = m.conversation_id WHERE m.id = ?",
                (events[0].accepted.message_id.replace("-", ""),),
            ).fetchone()[0]
            for events in (first, second)
        ]
    assert versions == [version_pk, version_pk]


def test_a_dropped_stream_without_a_client_id_stops_its_answer(stack: Stack) -> None:
    """Nobody can resume it, so it is not generated on for nobody (as /v1 without an
    Idempotency-Key)."""
    stream = Stream(stack)
    stream.put(send=send("[[slow]] " + "a long one " * 40))
    accepted = stream.next().accepted
    assert stream.next().WhichOneof("event") == "delta"
    stream.call.cancel()
    stream.close()
    stored = stack.stored(accepted.message_id)
    assert (stored["status"], stored["finish_reason"]) == ("stopped", "abort")
