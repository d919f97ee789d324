"""`make compose-test` (`python -m deploy.compose_test`): build, bring up, check, tear down.

Every step prints its time; the transcript also goes to bench/results/compose-test-*.md.
`--keep` leaves the stack running afterwards (for a look around; `docker compose down -v`
with the printed project name removes it).
"""

import argparse
import asyncio
import datetime as dt
import secrets
import signal
import socket
import tempfile
import time
from pathlib import Path

from deploy.compose_test import engine
from deploy.compose_test.client import Answer, Visitor, grpc_answer
from deploy.compose_test.stack import Stack, ensure_compose
from deploy.compose_test.transcript import Transcript, fail

PROJECT = "chat-compose-test"
REQUIRED_SETTINGS = ("SECRET_KEY", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS")
TEMPLATE_NAME = "Compose test: order problem"
FAQ_QUESTION = "How do I reach the compose test desk?"
# The workers' stop_grace_period: podman 4.3 restarts with its own 10 s otherwise (Docker
# takes the service's), which kills a draining worker before its answers end.
STOP_GRACE_S = "40"
LONG_QUESTION = "Write a long story about a lighthouse keeper and a storm, in many paragraphs."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stored(stack: Stack, answer: Answer) -> dict[str, str]:
    message_id = answer.accepted["assistant_message_id"]
    found = stack.python(
        "import json; from chatapp.conversations.models import Message; "
        f"m = Message.objects.get(pk='{message_id}'); "
        "print(json.dumps({'content': m.content, 'status': m.status}))"
    )
    assert isinstance(found, dict)
    return found


def check_answer(stack: Stack, answer: Answer, *, source: str = "model") -> str:
    done = answer.done
    if done["type"] != "chat.done" or done["status"] != "complete" or not answer.text:
        raise AssertionError(f"the answer did not complete: {done}")
    if done["source"] != source:
        raise AssertionError(f"answered from {done['source']}, not {source}")
    stored_as_streamed(stack, answer)
    return f"{len(answer.text)} characters, stored as streamed ({done['finish_reason']})"


def stored_as_streamed(stack: Stack, answer: Answer) -> None:
    kept = stored(stack, answer)
    if kept["content"] != answer.text:
        raise AssertionError(f"stored {kept['content']!r} but streamed {answer.text!r}")


def build_images(transcript: Transcript, logs: Path) -> None:
    with transcript.step("base image (Debian bookworm, mmdebstrap)") as step:
        step.note(engine.base_image_ensure())
    for target, tag in (("app", engine.APP_IMAGE), ("worker-cpu", engine.WORKER_CPU_IMAGE)):
        with transcript.step(f"build {target} image") as step:
            engine.build(target=target, tag=tag, log=logs / f"build-{target}.log")
            step.note(f"{tag}: {engine.image_size(tag)}")
    with transcript.step("build the test's redis and postgres (Debian packages)") as step:
        for name, tag in engine.TEST_IMAGES.items():
            engine.build_test_image(name=name, log=logs / f"build-{name}.log")
            step.note(f"{tag}: {engine.image_size(tag)}")


def bring_up(transcript: Transcript, stack: Stack, title: str) -> None:
    with transcript.step(title) as step:
        started = stack.up().splitlines()
        step.note(f"{sum('Started' in line for line in started)} containers started")
    with transcript.step("web, grpc and worker-cpu healthy"):
        stack.wait_healthy(["web", "worker-cpu", "grpc"], timeout_s=900)


def operator_checks(transcript: Transcript, stack: Stack, visitor: Visitor) -> str:
    with transcript.step("migrate ran once and succeeded; /healthz; Celery answers") as step:
        runs = stack.containers("migrate", every=True)
        if len(runs) != 1 or runs[0].get("ExitCode") != 0:
            raise AssertionError(f"migrate containers: {runs}")
        health = visitor.get("/healthz")
        if health.status_code != 200:
            raise AssertionError(f"/healthz: {health.status_code}")
        ping = stack.compose(
            "exec", "-T", "celery-worker", "celery", "-A", "chatapp", "inspect", "ping"
        )
        step.note("celery: " + ("pong" if "pong" in ping else ping[-200:]))
    password = secrets.token_urlsafe(16)
    with transcript.step("manage createsuperuser (docker compose run --rm web manage ...)"):
        stack.manage(
            "createsuperuser",
            "--noinput",
            "--username",
            "admin",
            "--email",
            "admin@example.com",
            env={"DJANGO_SUPERUSER_PASSWORD": password},
        )
    return password


def user_checks(transcript: Transcript, stack: Stack, visitor: Visitor, password: str) -> None:
    with transcript.step("login, and an answer streams from the model over the WebSocket") as step:
        visitor.login(username="admin", password=password)
        answer = asyncio.run(visitor.ask("Say hello to a new customer in one sentence."))
        step.note(check_answer(stack, answer))
    with transcript.step("/v1/chat/completions answers (API key)") as step:
        issued = stack.python(
            "import json; from django.contrib.auth.models import User; "
            "from chatapp.apikeys.services import api_key_create; "
            "k = api_key_create(user=User.objects.get(username='admin'), name='compose test'); "
            "print(json.dumps(k.secret))"
        )
        completion = visitor.completion(key=str(issued), text="Name one colour.")
        if not completion["text"] or completion["finish_reason"] not in ("stop", "length"):
            raise AssertionError(f"/v1 answered {completion}")
        step.note(f"{completion['chunks']} chunks, finish_reason {completion['finish_reason']}")
    with transcript.step("a gRPC stream answers (the grpc service, same key)") as step:
        streamed = grpc_answer(port=stack.grpc_port, key=str(issued), text="Name one fruit.")
        end = streamed["end"]
        if end is None or not hasattr(end, "status") or end.status != "complete":
            raise AssertionError(f"gRPC answered {streamed}")
        kept = stack.python(
            "import json; from chatapp.conversations.models import Message; "
            f"print(json.dumps(Message.objects.get(pk='{streamed['message_id']}').content))"
        )
        if kept != streamed["text"] or not kept:
            raise AssertionError(f"stored {kept!r} but streamed {streamed['text']!r}")
        step.note(f"{len(streamed['text'])} characters, stored as streamed ({end.finish_reason})")
    with transcript.step("publishing a template warms the worker") as step:
        step.note(publish_and_wait_warm(stack))
    with transcript.step("an FAQ entry saved is answered from the FAQ") as step:
        step.note(faq_entry_answers(stack, visitor))


def publish_and_wait_warm(stack: Stack) -> str:
    version_id = stack.python(
        "import json; from django.db import transaction; "
        "from chatapp.prompts.models import PromptTemplate; "
        "from chatapp.prompts.services import template_publish\n"
        "with transaction.atomic():\n"
        f"    t = PromptTemplate.objects.create(name={TEMPLATE_NAME!r}, "
        "system_prompt='You are the support assistant of Example Shop. Answer briefly.', "
        "body='My order {{order_number}} has a problem.', "
        "variables=[{'name': 'order_number', 'label': 'Order number', 'type': 'string', "
        "'max_length': 20}], sampling={'max_tokens': 40, 'temperature': 0})\n"
        "    v = template_publish(template=t, user=None)\n"
        "print(json.dumps(v.pk))"
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        state = stack.python(
            "import json; from chatapp.prompts.models import PromptTemplateVersion; "
            f"v = PromptTemplateVersion.objects.get(pk={version_id}); "
            "print(json.dumps([v.warmed_at is not None, v.warm_prompt_tokens, v.warm_error]))"
        )
        assert isinstance(state, list)
        if state[0] or state[2]:
            if state[2]:
                raise AssertionError(f"the warm-up failed: {state[2]}")
            return f"warmed: {state[1]} prompt tokens"
        time.sleep(3)
    raise AssertionError("the published version was not warmed within 180 s")


def faq_entry_answers(stack: Stack, visitor: Visitor) -> str:
    stack.python(
        "import json; from django.db import transaction; "
        "from chatapp.faq.models import FaqEntry; "
        "from chatapp.faq.services import faq_entry_changed\n"
        "with transaction.atomic():\n"
        f"    e = FaqEntry.objects.create(question={FAQ_QUESTION!r}, "
        "answer='Write to desk@example.com; we answer within a day.')\n"
        "    faq_entry_changed(entry_id=e.pk)\n"
        "print(json.dumps(e.pk))"
    )
    began = time.monotonic()
    while time.monotonic() - began < 120:
        answer = asyncio.run(visitor.ask(FAQ_QUESTION))
        if answer.done.get("source") == "faq":
            check_answer(stack, answer, source="faq")
            return f"answered from the FAQ {time.monotonic() - began:.1f} s after saving"
        time.sleep(3)
    raise AssertionError("the saved FAQ entry never answered its own question")


def restart_mid_answer(transcript: Transcript, stack: Stack, visitor: Visitor) -> None:
    with transcript.step("restart worker-cpu mid-answer: the answer is kept") as step:
        restarting: list[asyncio.Task[str]] = []

        async def restart() -> None:
            restarting.append(
                asyncio.create_task(
                    asyncio.to_thread(
                        stack.compose, "restart", "--timeout", STOP_GRACE_S, "worker-cpu"
                    )
                )
            )

        async def asked() -> Answer:
            answer = await visitor.ask(LONG_QUESTION, on_first_delta=restart)
            await restarting[0]
            return answer

        answer = asyncio.run(asked())
        step.note(kept_after_restart(stack, answer))
    with transcript.step("after the restart, the next question is answered") as step:
        stack.wait_healthy(["worker-cpu"], timeout_s=600)
        step.note(check_answer(stack, asyncio.run(visitor.ask("What is two plus two?"))))


def kept_after_restart(stack: Stack, answer: Answer) -> str:
    """The worker drains for INFERENCE_DRAIN_S: the answer ends there, goes on on another
    worker, or (one worker, still running at the deadline) ends `worker_lost` with its text
    kept (docs/operations.md, "When a process dies"). Never cut short in the store."""
    done = answer.done
    if done["type"] == "chat.done":
        return check_answer(stack, answer) + f"; resumed elsewhere: {done.get('resumed')}"
    if done.get("code") != "worker_lost" or not answer.text:
        raise AssertionError(f"the answer ended {done}")
    stored_as_streamed(stack, answer)
    return f"ended worker_lost at the drain deadline, its {len(answer.text)} characters kept"


def data_survives(transcript: Transcript, stack: Stack) -> None:
    bring_up(transcript, stack, "docker compose down, then up again")
    kept = "conversations, templates and FAQ entries kept; nothing re-prepared"
    with transcript.step(kept) as step:
        counts = stack.python(
            "import json; from chatapp.conversations.models import Conversation; "
            "from chatapp.prompts.models import PromptTemplate; "
            "from chatapp.faq.models import FaqEntry; "
            "print(json.dumps([Conversation.objects.count(), "
            f"PromptTemplate.objects.filter(name={TEMPLATE_NAME!r}).count(), "
            f"FaqEntry.objects.filter(question={FAQ_QUESTION!r}).count()]))"
        )
        assert isinstance(counts, list)
        if counts[0] < 4 or counts[1:] != [1, 1]:
            raise AssertionError(f"[conversations, templates, FAQ entries] after up: {counts}")
        prepared = stack.logs("prepare-model")
        if "already prepared" not in prepared:
            raise AssertionError(f"prepare-model prepared again:\n{prepared[-1500:]}")
        step.note(f"{counts[0]} conversations; prepare-model: already prepared")


def production_refuses(transcript: Transcript, env: dict[str, str]) -> None:
    with transcript.step("production settings refuse to start without their settings") as step:
        for missing in REQUIRED_SETTINGS:
            flags = [f"--env={k}={env[k]}" for k in REQUIRED_SETTINGS if k != missing]
            done = engine.run_image(engine.APP_IMAGE, *flags, command=["manage", "check"])
            if done.returncode == 0 or f"{missing} must" not in done.stderr:
                raise AssertionError(f"started without {missing}: {done.stderr[-300:]}")
            step.note(f"without {missing}: refused, naming it")


def stopped(signum: int, frame: object) -> None:
    """SIGTERM ends the run like Ctrl-C: the stack is still taken down."""
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keep", action="store_true", help="leave the stack running")
    args = parser.parse_args()
    transcript = Transcript()
    with transcript.step("prerequisites") as step:
        missing = engine.missing_tools()
        if missing:
            fail(f"missing {', '.join(missing)}: apt-get install podman runc mmdebstrap")
        ensure_compose()
        step.note(engine.podman("--version").strip())
    logs = Path(tempfile.mkdtemp(prefix="compose-test-logs-"))
    print(f"build logs: {logs}", flush=True)
    with engine.api_socket() as docker_host:
        build_images(transcript, logs)
        port, grpc_port = free_port(), free_port()
        env = Stack.write_env(folder=logs, web_port=port, grpc_port=grpc_port)
        stack = Stack(PROJECT, docker_host, logs / ".env", port, grpc_port)
        visitor = Visitor(port)
        signal.signal(signal.SIGTERM, stopped)
        try:
            stack.down(volumes=True)  # what an interrupted earlier run left
            with engine.HealthDriver(PROJECT):
                bring_up(transcript, stack, "docker compose up -d (profile cpu)")
                password = operator_checks(transcript, stack, visitor)
                user_checks(transcript, stack, visitor, password)
                restart_mid_answer(transcript, stack, visitor)
                with transcript.step("docker compose down"):
                    stack.down()
                data_survives(transcript, stack)
            production_refuses(transcript, env)
        finally:
            for service in ("web", "worker-cpu", "prepare-model", "migrate"):
                (logs / f"{service}.log").write_text(stack.logs(service))
            if not args.keep:
                with transcript.step("clean up: containers, network, volumes"):
                    stack.down(volumes=True)
                    left = engine.leftovers(PROJECT)
                    if left:
                        raise AssertionError(f"left behind: {left}")
    report = transcript.summary()
    print(report)
    stamp = f"{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}"
    out = engine.ROOT / "bench" / "results" / f"compose-test-{stamp}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"# make compose-test\n\n{report}\n\nLogs: {logs}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
