"""Where an answer's time to first token went reaches the page with its `chat.done`.

Through the full ASGI app with the scripted worker; "[[slow]]" makes its engine take 50 ms a
token, so the engine's share is known and the web process's hops must add up around it.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from tests.conftest import Connect, RunningWorker
from tests.support.sockets import (
    ask,
    first_reply,
    open_socket,
    receive_until,
    resume_frame,
)

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_done_of_a_sent_question_carries_its_first_token_hops_in_order(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    ws = await open_socket(connect, alice)
    frames = await ask(ws, "[[slow]] where is my parcel")
    # the wait is never silent: queued (accepted), then a worker reads it (started), then text
    assert [f["type"] for f in frames[:3]] == ["chat.accepted", "chat.started", "chat.delta"]
    assert frames[1]["message_id"] == frames[0]["assistant_message_id"]
    hops = frames[-1]["hops"]
    assert hops is not None
    web = [
        hops["admitted_ms"],
        hops["queued_ms"],
        hops["relay_first_delta_ms"],
        hops["socket_first_delta_ms"],
    ]
    assert all(isinstance(mark, float | int) for mark in web), hops
    assert web == sorted(web), f"the web process's marks are out of order: {hops}"
    assert web[0] >= 0
    # the question is stored while the worker starts, not before its request is queued
    assert hops["queued_ms"] <= hops["stored_ms"] <= hops["socket_first_delta_ms"]
    worker = [
        hops["worker_prompt_ms"],
        hops["worker_engine_first_token_ms"],
        hops["worker_first_delta_sent_ms"],
    ]
    assert worker == sorted(worker), hops
    assert worker[1] >= 45  # the scripted engine's 50 ms to its first token
    # the worker's span sits inside the web process's wait for the first delta
    assert hops["relay_first_delta_ms"] - hops["queued_ms"] >= worker[2]
    # ttft_ms is taken when the first text is ready, the last hop once the channel layer took
    # it: the send sits between them (its cost varies, so no equality is asserted)
    ttft_ms = frames[-1]["timings"]["ttft_ms"]
    assert worker[1] <= ttft_ms <= worker[2], (ttft_ms, hops)
    await ws.disconnect()


async def test_an_answer_followed_from_another_socket_has_no_hops(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    """The second socket did not send the question: it has no clock of its wait."""
    first = await open_socket(connect, alice)
    accepted = await first_reply(first, "[[slow]] one two three four five six seven eight")
    assert accepted["type"] == "chat.accepted"
    second = await open_socket(connect, alice)
    await second.send_json_to(resume_frame(accepted["assistant_message_id"]))
    followed = await receive_until(second, "chat.done")
    assert followed[-1]["status"] == "complete"
    assert followed[-1]["hops"] is None
    own = await receive_until(first, "chat.done")
    assert own[-1]["hops"] is not None
    await first.disconnect()
    await second.disconnect()
