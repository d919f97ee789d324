"""Frame bytes by kind (text, template, patch) and FAQ hits, through the full ASGI app."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User

from chatapp.prompts.models import PromptTemplateVersion
from tests.chatapp.metrics.samples import Changes, s
from tests.conftest import Connect
from tests.support.faq import ANSWER, FaqWorker
from tests.support.sockets import ask, edit_frame, open_socket, receive_until
from tests.support.templates import RENDERED, VALUES, full_text, patched, templated

pytestmark = pytest.mark.django_db(transaction=True)

KINDS = ("text", "template", "patch")


def frame_series() -> list[tuple[str, dict[str, str]]]:
    names = (
        "chat:request_frame_bytes_count",
        "chat:request_frame_bytes_total",
        "chat:request_prompt_bytes_total",
    )
    return [s(name, kind=kind) for name in names for kind in KINDS]


def wire(frame: dict[str, object]) -> int:
    return len(json.dumps(frame).encode())


async def test_each_kind_of_frame_counts_its_bytes_and_the_text_it_stands_for(
    connect: Connect, alice: User, published: PromptTemplateVersion
) -> None:
    changes = Changes(*frame_series())
    ws = await open_socket(connect, alice)

    reference = templated(published, variables=VALUES)  # the reference and the values only
    await ws.send_json_to(reference)
    await receive_until(ws, "chat.done")

    edited = RENDERED.replace("a refund", "a replacement 🚲, in blue") + " Thanks!"
    edits = patched(published, edited)
    await ws.send_json_to(edits)
    first = await receive_until(ws, "chat.done")

    edit = edit_frame(first[0]["user_message_id"], "Where is my order?")
    await ws.send_json_to(edit)
    await receive_until(ws, "chat.done")

    assert changes.delta("chat:request_frame_bytes_count", kind="template") == 1
    assert changes.delta("chat:request_frame_bytes_total", kind="template") == wire(reference)
    assert changes.delta("chat:request_prompt_bytes_total", kind="template") == len(
        RENDERED.encode()
    )
    assert changes.delta("chat:request_frame_bytes_count", kind="patch") == 1
    assert changes.delta("chat:request_frame_bytes_total", kind="patch") == wire(edits)
    assert changes.delta("chat:request_prompt_bytes_total", kind="patch") == len(edited.encode())
    # an edit carries its whole text
    assert changes.delta("chat:request_frame_bytes_count", kind="text") == 1
    assert changes.delta("chat:request_frame_bytes_total", kind="text") == wire(edit)
    assert changes.delta("chat:request_prompt_bytes_total", kind="text") == len(
        b"Where is my order?"
    )


async def test_a_resend_with_the_full_text_counts_as_text_once(
    connect: Connect, alice: User, published: PromptTemplateVersion
) -> None:
    changes = Changes(*frame_series())
    ws = await open_socket(connect, alice)
    edited = RENDERED + " (second attempt)"
    frame = patched(published, edited, hashed="something else entirely")
    await ws.send_json_to(frame)
    assert (await ws.receive_json_from(timeout=5))["type"] == "chat.resend_full"
    full = full_text(frame, edited)
    await ws.send_json_to(full)
    await receive_until(ws, "chat.done")

    assert changes.delta("chat:request_frame_bytes_count", kind="patch") == 0
    assert changes.delta("chat:request_frame_bytes_count", kind="text") == 1
    assert changes.delta("chat:request_frame_bytes_total", kind="text") == wire(full)


async def test_faq_hits_and_misses_are_counted_per_answer(
    connect: Connect, alice: User, faq_worker: FaqWorker
) -> None:
    await faq_worker.entry_cached()
    changes = Changes(
        s("chat:faq_requests_total", result="hit"),
        s("chat:faq_requests_total", result="miss"),
        s("chat:answers_total", source="faq", status="complete"),
        s("chat:time_to_first_token_seconds_count", source="faq"),
        s("chat:e2e_request_latency_seconds_count", source="faq"),
        s("chat:generation_tokens_total"),
    )
    ws = await open_socket(connect, alice)
    hit = await ask(ws, "how can I reset my password")
    assert hit[-1]["source"] == "faq"
    assert "".join(f["text"] for f in hit if f["type"] == "chat.delta") == ANSWER
    miss = await ask(ws, "what are your opening hours on sunday")
    assert miss[-1]["source"] == "model"

    assert changes.delta("chat:faq_requests_total", result="hit") == 1
    assert changes.delta("chat:faq_requests_total", result="miss") == 1
    assert changes.delta("chat:answers_total", source="faq", status="complete") == 1
    assert changes.delta("chat:time_to_first_token_seconds_count", source="faq") == 1
    assert changes.delta("chat:e2e_request_latency_seconds_count", source="faq") == 1
    # a FAQ answer generates nothing: only the model's answer counts tokens
    assert changes.delta("chat:generation_tokens_total") == miss[-1]["usage"]["completion_tokens"]
