"""Answer metrics through the full ASGI app: each answer moves them exactly once.

A scripted-engine worker on the in-memory channel layer (fast, exact); the real vLLM engine's
counters are covered in tests/integration/test_engine_metrics.py.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from chatapp.answers.runtime import answer_runtime_close
from tests.chatapp.metrics.samples import Changes, s, value, wait_for_value
from tests.conftest import Connect, RunningWorker
from tests.support.sockets import (
    ask,
    first_reply,
    open_socket,
    receive_until,
    resume_frame,
    send_frame,
)

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER_SERIES = (
    s("chat:answers_total", source="model", status="complete"),
    s("chat:time_to_first_token_seconds_count", source="model"),
    s("chat:time_to_first_token_seconds_sum", source="model"),
    s("chat:inter_token_latency_seconds_count"),
    s("chat:inter_token_latency_seconds_sum"),
    s("chat:e2e_request_latency_seconds_count", source="model"),
    s("chat:request_queue_time_seconds_count"),
    s("chat:request_queue_time_seconds_sum"),
    s("chat:prompt_tokens_total"),
    s("chat:cached_prompt_tokens_total"),
    s("chat:generation_tokens_total"),
    s("chat:faq_requests_total", result="miss"),
    s("chat:faq_requests_total", result="hit"),
    s("chat:request_frame_bytes_count", kind="text"),
    s("chat:request_frame_bytes_sum", kind="text"),
    s("chat:request_frame_bytes_total", kind="text"),
    s("chat:request_prompt_bytes_total", kind="text"),
)


async def test_one_answer_watched_by_two_sockets_is_counted_once(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    changes = Changes(*ANSWER_SERIES)
    first = await open_socket(connect, alice)
    second = await open_socket(connect, alice)  # another tab follows the same answer
    question = "where is my parcel ünïcode"
    frame = send_frame(question + " [[slow]]")
    await first.send_json_to(frame)
    accepted = await first.receive_json_from(timeout=5)
    await second.send_json_to(resume_frame(accepted["assistant_message_id"]))
    done = (await receive_until(first, "chat.done"))[-1]
    followed = (await receive_until(second, "chat.done"))[-1]
    # the same end; only the socket that sent the question has the hops of its wait
    assert followed == {**done, "hops": None}
    assert done["hops"] is not None

    usage, timings = done["usage"], done["timings"]
    assert changes.delta("chat:answers_total", source="model", status="complete") == 1
    assert changes.delta("chat:time_to_first_token_seconds_count", source="model") == 1
    assert changes.delta("chat:time_to_first_token_seconds_sum", source="model") == pytest.approx(
        timings["ttft_ms"] / 1000
    )
    # the mean gap between this answer's tokens, observed once
    tokens = usage["completion_tokens"]
    assert tokens >= 2
    assert changes.delta("chat:inter_token_latency_seconds_count") == 1
    assert changes.delta("chat:inter_token_latency_seconds_sum") == pytest.approx(
        (timings["total_ms"] - timings["ttft_ms"]) / (tokens - 1) / 1000
    )
    assert changes.delta("chat:e2e_request_latency_seconds_count", source="model") == 1
    assert changes.delta("chat:request_queue_time_seconds_count") == 1
    assert changes.delta("chat:request_queue_time_seconds_sum") == pytest.approx(
        timings["queue_wait_ms"] / 1000
    )
    assert changes.delta("chat:prompt_tokens_total") == usage["prompt_tokens"] > 0
    assert changes.delta("chat:cached_prompt_tokens_total") == usage["cached_prompt_tokens"]
    assert changes.delta("chat:generation_tokens_total") == tokens
    # a first question is looked up in the FAQ cache first; this worker has none: a miss
    assert changes.delta("chat:faq_requests_total", result="miss") == 1
    assert changes.delta("chat:faq_requests_total", result="hit") == 0
    # the frame as received, and the text it stands for (here the same text, in UTF-8)
    wire = len(json.dumps(frame).encode())
    assert changes.delta("chat:request_frame_bytes_count", kind="text") == 1
    assert changes.delta("chat:request_frame_bytes_sum", kind="text") == wire
    assert changes.delta("chat:request_frame_bytes_total", kind="text") == wire
    assert changes.delta("chat:request_prompt_bytes_total", kind="text") == len(
        (question + " [[slow]]").encode()
    )


async def test_follow_ups_are_not_faq_lookups(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    ws = await open_socket(connect, alice)
    first = await ask(ws, "first question")
    changes = Changes(
        s("chat:faq_requests_total", result="miss"),
        s("chat:answers_total", source="model", status="complete"),
    )
    await ask(ws, "and then?", conversation_id=first[0]["conversation_id"])
    assert changes.delta("chat:answers_total", source="model", status="complete") == 1
    assert changes.delta("chat:faq_requests_total", result="miss") == 0


@override_settings(CHAT_FAQ_ENABLED=False)
async def test_without_the_faq_cache_nothing_is_counted_as_a_miss(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    changes = Changes(s("chat:faq_requests_total", result="miss"))
    ws = await open_socket(connect, alice)
    await ask(ws, "a first question")
    assert changes.delta("chat:faq_requests_total", result="miss") == 0


async def test_a_failed_answer_counts_one_error_and_refused_frames_count_theirs(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    changes = Changes(
        s("chat:errors_total", code="engine"),
        s("chat:errors_total", code="bad_json"),
        s("chat:answers_total", source="model", status="failed"),
        s("chat:e2e_request_latency_seconds_count", source="model"),
    )
    first = await open_socket(connect, alice)
    second = await open_socket(connect, alice)
    accepted = await first_reply(first, "please [[fail]] now [[slow]]")
    await second.send_json_to(resume_frame(accepted["assistant_message_id"]))
    for ws in (first, second):  # both are told
        assert (await receive_until(ws, "chat.error"))[-1]["code"] == "engine"
    await first.send_to(text_data="{not json")
    assert (await first.receive_json_from(timeout=5))["code"] == "bad_json"

    assert changes.delta("chat:answers_total", source="model", status="failed") == 1
    assert changes.delta("chat:errors_total", code="engine") == 1
    assert changes.delta("chat:errors_total", code="bad_json") == 1
    assert changes.delta("chat:e2e_request_latency_seconds_count", source="model") == 0


async def test_streams_and_admitted_requests_are_gauged_while_an_answer_generates(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    idle = value("chat:active_streams")
    ws = await open_socket(connect, alice)
    words = " ".join(f"w{i}" for i in range(30))
    await ws.send_json_to(send_frame(f"{words} [[slow]]"))
    await ws.receive_json_from(timeout=5)  # accepted; the relay takes it right after
    await wait_for_value("chat:active_streams", idle + 1)
    await wait_for_value("chat:admission_in_flight", 1)  # sampled every relay heartbeat
    await receive_until(ws, "chat.done", timeout=10)
    assert value("chat:active_streams") == idle
    await wait_for_value("chat:admission_in_flight", 0)


@override_settings(CHAT_USER_RATE=1)
async def test_admission_refusals_are_counted_by_reason(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    await answer_runtime_close()  # admission limits are read when the runtime starts
    changes = Changes(
        s("chat:admission_refusals_total", reason="rate_limited"),
        s("chat:errors_total", code="rate_limited"),
        s("chat:request_frame_bytes_count", kind="text"),
    )
    ws = await open_socket(connect, alice)
    await ask(ws, "one")
    refused = await first_reply(ws, "two")

    assert refused["code"] == "rate_limited"
    assert changes.delta("chat:admission_refusals_total", reason="rate_limited") == 1
    assert changes.delta("chat:errors_total", code="rate_limited") == 1
    # only frames that started an answer are measured
    assert changes.delta("chat:request_frame_bytes_count", kind="text") == 1
