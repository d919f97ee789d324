"""Handoff over the sockets: a customer asks for a person, an agent claims and replies, the
assistant stays silent meanwhile, and the conversation goes back to it.

Through the whole ASGI app (origin check, session auth, routing) with a real worker on a
scripted engine, whose recorded prompts say whether the assistant was asked.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from prometheus_client import REGISTRY

from chatapp.asgi import application
from chatapp.conversations.models import Message
from chatapp.handoff.models import Handoff
from tests.chatapp.handoff.people import agent_made, conversation_made
from tests.conftest import Connect, RunningWorker, _session_cookie
from tests.support.faq import ANSWER, FaqWorker
from tests.support.sockets import (
    ask,
    claim_frame,
    edit_frame,
    handoff_frame,
    next_of,
    open_socket,
    receive_until,
    regenerate_frame,
    send_frame,
    state_becomes,
)

pytestmark = pytest.mark.django_db(transaction=True)

Console = Callable[[User], Coroutine[Any, Any, WebsocketCommunicator]]


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
async def console() -> AsyncIterator[Console]:
    """Open agent console sockets (session auth, like the console page)."""
    opened: list[WebsocketCommunicator] = []

    async def _open(user: User) -> WebsocketCommunicator:
        cookie = await sync_to_async(_session_cookie)(user)
        ws = WebsocketCommunicator(
            application,
            "/ws/agent/",
            headers=[(b"origin", b"http://localhost"), (b"cookie", f"sessionid={cookie}".encode())],
        )
        opened.append(ws)
        connected, _ = await ws.connect()
        assert connected
        return ws

    yield _open
    for ws in opened:
        with contextlib.suppress(Exception):
            await ws.disconnect()


async def waiting_customer(
    connect: Connect, user: User
) -> tuple[WebsocketCommunicator, str, Handoff]:
    """A customer who asked the assistant once, then for a person, and waits: their socket,
    the conversation, the ask."""
    customer = await open_socket(connect, user)
    conversation_id = (await ask(customer, "hello"))[0]["conversation_id"]
    await customer.send_json_to(handoff_frame(conversation_id))
    await state_becomes(customer, "waiting")
    return customer, conversation_id, await sync_to_async(Handoff.objects.get)()


async def test_a_customer_talks_to_a_person_and_back_to_the_assistant(
    connect: Connect, alice: User, scripted_worker: RunningWorker, console: Console
) -> None:
    dana = await sync_to_async(agent_made)("dana", "Dana")
    desk = await console(dana)
    assert (await desk.receive_json_from(timeout=5)) == {"type": "agent.queue", "items": []}
    customer = await open_socket(connect, alice)
    conversation_id = (await ask(customer, "my parcel is broken"))[0]["conversation_id"]
    requests, claims = (sample("chat:handoffs_total", action=a) for a in ("request", "claim"))
    first_responses = sample("chat:handoff_first_response_seconds_count")

    await customer.send_json_to(handoff_frame(conversation_id))
    await customer.send_json_to(handoff_frame(conversation_id))  # a double click: one ask
    state = await next_of(customer, "chat.handoff_state")
    assert (state["state"], state["position"], state["notice"]) == (
        "waiting",
        1,
        "A person will join shortly. You are next in line.",
    )
    [waiting] = (await next_of(desk, "agent.queue"))["items"]
    assert (waiting["first_question"], waiting["state"]) == ("my parcel is broken", "waiting")
    await next_of(customer, "chat.handoff_state")  # the double click's answer: the same
    assert sample("chat:handoffs_total", action="request") == requests + 1
    assert sample("chat:handoffs_waiting") == 1

    # while waiting, the customer's words are kept for the person, not answered by the bot
    await customer.send_json_to(send_frame("it arrived crushed", conversation_id=conversation_id))
    kept = await next_of(customer, "chat.human")
    assert (kept["message"]["role"], kept["message"]["content"]) == ("user", "it arrived crushed")

    await desk.send_json_to(claim_frame(waiting["handoff_id"]))
    joined = await state_becomes(customer, "with_agent")
    assert (joined["state"], joined["agent"], joined["notice"]) == (
        "with_agent",
        "Dana",
        "Dana joined the conversation.",
    )
    opened = str(uuid.uuid4())
    await desk.send_json_to(
        {"type": "agent.open", "id": opened, "conversation_id": conversation_id}
    )
    transcript = await next_of(desk, "agent.transcript")
    assert [(m["role"], m["content"]) for m in transcript["messages"]][-1] == (
        "user",
        "it arrived crushed",
    )

    reply_id = str(uuid.uuid4())
    reply = {
        "type": "agent.send",
        "id": reply_id,
        "handoff_id": waiting["handoff_id"],
        "text": "Sorry! A new one is on its way.",
    }
    await desk.send_json_to(reply)
    shown = await next_of(customer, "chat.human")
    assert (shown["message"]["role"], shown["message"]["sender"], shown["message"]["content"]) == (
        "agent",
        "Dana",
        "Sorry! A new one is on its way.",
    )
    echoed = await next_of(desk, "agent.message")
    assert echoed["id"] == reply_id
    assert sample("chat:handoffs_total", action="claim") == claims + 1
    assert sample("chat:handoffs_waiting") == 0
    assert sample("chat:handoff_first_response_seconds_count") == first_responses + 1
    await desk.send_json_to(reply)  # sent again (a reconnect): the same message, not a second
    again = await next_of(desk, "agent.message")
    assert again["message"]["id"] == echoed["message"]["id"]
    assert await sync_to_async(Message.objects.filter(role="agent").count)() == 1
    # the assistant kept silent: no answer to the customer (the model only drafted for Dana)
    assert await sync_to_async(Message.objects.filter(role="assistant").count)() == 1

    await desk.send_json_to(
        {"type": "agent.release", "id": str(uuid.uuid4()), "handoff_id": waiting["handoff_id"]}
    )
    back = await state_becomes(customer, "bot")
    assert (back["state"], back["notice"]) == ("bot", "Back with the assistant.")
    answered = await ask(
        customer, "thanks, and when will it come?", conversation_id=conversation_id
    )
    assert answered[-1]["status"] == "complete"
    # the assistant reads the whole conversation, the person's words as its own side
    prompt = scripted_worker.engine.prompts[-1]
    assert "it arrived crushed" in prompt
    assert "<|im_start|>assistant\nSorry! A new one is on its way." in prompt


async def test_a_reconnecting_page_gets_what_it_missed_once(
    connect: Connect, alice: User, scripted_worker: RunningWorker, console: Console
) -> None:
    dana = await sync_to_async(agent_made)("dana", "Dana")
    customer, conversation_id, handoff = await waiting_customer(connect, alice)
    desk = await console(dana)
    await desk.send_json_to(claim_frame(handoff.pk))
    await customer.disconnect()  # the customer's network drops
    for text in ("first", "second"):
        await desk.send_json_to(
            {"type": "agent.send", "id": str(uuid.uuid4()), "handoff_id": handoff.pk, "text": text}
        )
        await next_of(desk, "agent.message")

    again = await open_socket(connect, alice)
    first_id = await sync_to_async(lambda: str(Message.objects.get(content="first").id))()
    await again.send_json_to(
        {
            "type": "chat.sync",
            "id": str(uuid.uuid4()),
            "conversation_id": conversation_id,
            "after_message_id": first_id,
        }
    )
    state = await again.receive_json_from(timeout=5)
    missed = await again.receive_json_from(timeout=5)
    assert (state["type"], state["state"]) == ("chat.handoff_state", "with_agent")
    assert (missed["type"], missed["message"]["content"]) == ("chat.human", "second")
    assert await again.receive_nothing(timeout=0.3)
    # and it is live again
    await desk.send_json_to(
        {"type": "agent.send", "id": str(uuid.uuid4()), "handoff_id": handoff.pk, "text": "third"}
    )
    assert (await next_of(again, "chat.human"))["message"]["content"] == "third"


async def test_two_agents_claim_at_once_and_one_is_told_who_won(
    connect: Connect, alice: User, scripted_worker: RunningWorker, console: Console
) -> None:
    dana = await sync_to_async(agent_made)("dana", "Dana")
    eli = await sync_to_async(agent_made)("eli", "Eli")
    _, _, handoff = await waiting_customer(connect, alice)
    desks = [await console(dana), await console(eli)]
    for desk in desks:
        await desk.send_json_to(claim_frame(handoff.pk))
    errors = []
    for desk in desks:
        frames = []
        while not await desk.receive_nothing(timeout=0.3):
            frames.append(await desk.receive_json_from())
        errors += [f for f in frames if f["type"] == "agent.error"]
    [lost] = errors
    assert lost["code"] == "busy"
    assert lost["message"] == "Dana already took this conversation."


async def test_only_agents_get_the_console(
    connect: Connect, alice: User, scripted_worker: RunningWorker, console: Console
) -> None:
    staff = await sync_to_async(User.objects.create_user)(
        "sam", password="pw-sam-123", is_staff=True
    )
    for user in (alice, staff):
        cookie = await sync_to_async(_session_cookie)(user)
        ws = WebsocketCommunicator(
            application,
            "/ws/agent/",
            headers=[(b"origin", b"http://localhost"), (b"cookie", f"sessionid={cookie}".encode())],
        )
        await ws.connect()
        closed = await ws.receive_output(timeout=5)
        assert closed == {
            "type": "websocket.close",
            "code": 4403,
            "reason": "Only agents may use the console.",
        }
    # and a customer cannot ask for a person in someone else's conversation
    bob = await sync_to_async(User.objects.create_user)("bob", password="pw-bob-123")
    customer = await open_socket(connect, alice)
    conversation_id = (await ask(customer, "hello"))[0]["conversation_id"]
    stranger = await open_socket(connect, bob)
    await stranger.send_json_to(handoff_frame(conversation_id))
    refused = await stranger.receive_json_from(timeout=5)
    assert (refused["type"], refused["code"]) == ("chat.error", "not_found")
    assert not await sync_to_async(Handoff.objects.exists)()


async def test_the_model_drafts_the_reply_for_the_agent_and_stops_when_they_write(
    connect: Connect, alice: User, scripted_worker: RunningWorker, console: Console
) -> None:
    dana = await sync_to_async(agent_made)("dana", "Dana")
    customer = await open_socket(connect, alice)
    conversation_id = (await ask(customer, "hello"))[0]["conversation_id"]
    await customer.send_json_to(handoff_frame(conversation_id))
    await customer.send_json_to(send_frame("it arrived crushed", conversation_id=conversation_id))
    await next_of(customer, "chat.human")
    stored = await sync_to_async(Message.objects.count)()
    handoff = await sync_to_async(Handoff.objects.get)()
    desk = await console(dana)

    # taking the conversation drafts the reply to the customer's last message
    await desk.send_json_to(claim_frame(handoff.pk))
    draft = []
    while (frame := await next_of(desk, "agent.draft"))["status"] == "streaming":
        draft.append(frame["text"])
    assert frame["status"] == "done"
    assert "".join(draft) == "You said: it arrived crushed"
    assert scripted_worker.engine.prompts[-1].endswith(
        "<|im_start|>user\nit arrived crushed<|im_end|>\n<|im_start|>assistant\n"
    )
    assert await sync_to_async(Message.objects.count)() == stored  # a draft is not stored

    # the customer writes again: a new draft; the agent starts typing: it stops
    await customer.send_json_to(
        send_frame("[[slow]] " + "where is it now " * 20, conversation_id=conversation_id)
    )
    first = await next_of(desk, "agent.draft")
    assert first["status"] == "streaming"
    await desk.send_json_to(
        {"type": "agent.draft_stop", "id": str(uuid.uuid4()), "conversation_id": conversation_id}
    )
    while (frame := await next_of(desk, "agent.draft"))["status"] == "streaming":
        pass
    assert (frame["status"], frame["draft_id"]) == ("stopped", first["draft_id"])
    assert await desk.receive_nothing(timeout=0.5)  # the engine stopped: nothing more of it
    assert await sync_to_async(Message.objects.filter(role="assistant").count)() == 1


async def test_each_side_sees_the_other_typing_and_nobody_else_does(
    connect: Connect, alice: User, bob: User, scripted_worker: RunningWorker, console: Console
) -> None:
    dana = await sync_to_async(agent_made)("dana", "Dana")
    eli = await sync_to_async(agent_made)("eli", "Eli")
    customer, conversation_id, handoff = await waiting_customer(connect, alice)
    desk, other_desk = await console(dana), await console(eli)
    await desk.send_json_to(claim_frame(handoff.pk))
    await state_becomes(customer, "with_agent")

    typing = {"type": "chat.typing", "id": str(uuid.uuid4()), "conversation_id": conversation_id}
    await customer.send_json_to(typing)
    assert (await next_of(desk, "agent.customer_typing"))["conversation_id"] == conversation_id
    await desk.send_json_to({**typing, "type": "agent.typing"})
    shown = await next_of(customer, "chat.agent_typing")
    assert (shown["conversation_id"], shown["agent"]) == (conversation_id, "Dana")

    # another agent, not holding it, cannot type into it; another customer cannot either
    await other_desk.send_json_to({**typing, "type": "agent.typing"})
    stranger = await open_socket(connect, bob)
    await stranger.send_json_to(typing)
    assert await customer.receive_nothing(timeout=0.3)
    frames = []
    while not await desk.receive_nothing(timeout=0.3):
        frames.append((await desk.receive_json_from())["type"])
    assert "agent.customer_typing" not in frames


async def test_with_nobody_online_the_customer_is_told_and_may_leave_an_email(
    connect: Connect, alice: User, scripted_worker: RunningWorker, console: Console
) -> None:
    customer = await open_socket(connect, alice)
    conversation_id = (await ask(customer, "hello"))[0]["conversation_id"]
    await customer.send_json_to(handoff_frame(conversation_id))
    state = await next_of(customer, "chat.handoff_state")
    assert (state["state"], state["nobody_online"]) == ("waiting", True)
    assert state["notice"].startswith("Nobody from the team is online right now.")

    bad = {**handoff_frame(conversation_id, "contact"), "email": "not an address"}
    await customer.send_json_to(bad)
    refused = await next_of(customer, "chat.error")
    assert refused["message"] == "That does not look like an email address."
    await customer.send_json_to(
        {**handoff_frame(conversation_id, "contact"), "email": "a@b.example"}
    )
    left = await next_of(customer, "chat.handoff_state")
    assert (left["contact_email"], left["notice"]) == (
        "a@b.example",
        "Thank you! The team will write to you at a@b.example.",
    )

    dana = await sync_to_async(agent_made)("dana", "Dana")
    desk = await console(dana)
    [item] = (await desk.receive_json_from(timeout=5))["items"]
    assert item["contact_email"] == "a@b.example"
    # somebody is online now: a waiting customer without an address is told so
    second = await sync_to_async(conversation_made)(alice, "second question")
    await customer.send_json_to(handoff_frame(str(second.id)))
    online = await next_of(customer, "chat.handoff_state")
    while online["conversation_id"] != str(second.id):  # the first one's news
        online = await next_of(customer, "chat.handoff_state")
    assert (online["nobody_online"], online["notice"]) == (
        False,
        "A person will join shortly. You are number 2 in line.",
    )


async def test_a_reconnected_console_goes_on_with_the_conversations_it_holds(
    connect: Connect, alice: User, scripted_worker: RunningWorker, console: Console
) -> None:
    dana = await sync_to_async(agent_made)("dana", "Dana")
    customer, conversation_id, handoff = await waiting_customer(connect, alice)
    first = await console(dana)
    await first.send_json_to(claim_frame(handoff.pk))
    await state_becomes(customer, "with_agent")
    await first.disconnect()  # the agent's network drops; the customer stays with them

    again = await console(dana)
    await customer.send_json_to(send_frame("are you there?", conversation_id=conversation_id))
    got = await next_of(again, "agent.message")
    assert got["message"]["content"] == "are you there?"
    draft = await next_of(again, "agent.draft")  # and the model drafts the reply
    assert (draft["conversation_id"], draft["status"]) == (conversation_id, "streaming")


async def test_an_ask_from_the_pages_offer_is_kept_as_offered(
    connect: Connect, alice: User, scripted_worker: RunningWorker, console: Console
) -> None:
    customer = await open_socket(connect, alice)
    conversation_id = (await ask(customer, "hello"))[0]["conversation_id"]
    await customer.send_json_to({**handoff_frame(conversation_id), "reason": "offered"})
    await state_becomes(customer, "waiting")
    desk = await console(await sync_to_async(agent_made)("dana", "Dana"))
    [item] = (await desk.receive_json_from(timeout=5))["items"]
    assert item["reason"] == "offered"
    assert await sync_to_async(lambda: Handoff.objects.get().reason)() == "offered"


async def test_an_agent_hands_the_conversation_to_another(
    connect: Connect, alice: User, scripted_worker: RunningWorker, console: Console
) -> None:
    dana = await sync_to_async(agent_made)("dana", "Dana")
    eli = await sync_to_async(agent_made)("eli", "Eli")
    customer, conversation_id, handoff = await waiting_customer(connect, alice)
    dana_desk, eli_desk = await console(dana), await console(eli)
    await dana_desk.send_json_to(claim_frame(handoff.pk))
    await state_becomes(customer, "with_agent")

    unknown = {"type": "agent.transfer", "id": str(uuid.uuid4()), "handoff_id": handoff.pk}
    await dana_desk.send_json_to({**unknown, "to_agent": "nobody"})
    assert (await next_of(dana_desk, "agent.error"))["message"] == "No agent 'nobody'."
    await dana_desk.send_json_to({**unknown, "id": str(uuid.uuid4()), "to_agent": "eli"})
    moved = await state_becomes(customer, "with_agent")
    assert (moved["agent"], moved["notice"]) == ("Eli", "Eli joined the conversation.")
    while not any(i["mine"] for i in (await next_of(eli_desk, "agent.queue"))["items"]):
        pass
    # Eli's console now gets the customer's messages; Dana's reply is refused
    await customer.send_json_to(send_frame("hi Eli", conversation_id=conversation_id))
    assert (await next_of(eli_desk, "agent.message"))["message"]["content"] == "hi Eli"
    await dana_desk.send_json_to(
        {"type": "agent.send", "id": str(uuid.uuid4()), "handoff_id": handoff.pk, "text": "me"}
    )
    assert (await next_of(dana_desk, "agent.error"))["message"] == "Eli holds this conversation."


async def test_while_a_person_is_involved_regenerate_and_edit_do_not_wake_the_assistant(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    customer = await open_socket(connect, alice)
    frames = await ask(customer, "hello")
    question_id, answer_id = frames[0]["user_message_id"], frames[0]["assistant_message_id"]
    conversation_id = frames[0]["conversation_id"]
    await customer.send_json_to(handoff_frame(conversation_id))
    await state_becomes(customer, "waiting")
    prompts = len(scripted_worker.engine.prompts)

    for frame in (regenerate_frame(answer_id), edit_frame(question_id, "hello again")):
        await customer.send_json_to(frame)
        refused = await next_of(customer, "chat.error")
        assert (refused["id"], refused["code"], refused["message"]) == (
            frame["id"],
            "busy",
            "A person of the team is handling this conversation: write to them instead.",
        )
    assert len(scripted_worker.engine.prompts) == prompts
    assert await sync_to_async(Message.objects.filter(content="hello again").exists)() is False
    # back with the assistant, a regenerate works again
    await customer.send_json_to(handoff_frame(conversation_id, "cancel"))
    await state_becomes(customer, "bot")
    await customer.send_json_to(regenerate_frame(answer_id))
    assert (await receive_until(customer, "chat.done"))[-1]["status"] == "complete"


@pytest.mark.usefixtures("intents_loaded")
async def test_asking_for_a_person_in_words_is_an_ask_and_the_assistant_stays_silent(
    connect: Connect, alice: User, scripted_worker: RunningWorker, console: Console
) -> None:
    desk = await console(await sync_to_async(agent_made)("dana", "Dana"))
    customer = await open_socket(connect, alice)
    conversation_id = (await ask(customer, "my parcel is late"))[0]["conversation_id"]
    # naming a person is not asking for one: the assistant answers
    answered = await ask(
        customer,
        "the delivery person left it at the wrong door",
        conversation_id=conversation_id,
    )
    assert answered[-1]["type"] == "chat.done"
    prompts = len(scripted_worker.engine.prompts)

    sent = send_frame("can I talk to a real person please", conversation_id=conversation_id)
    await customer.send_json_to(sent)
    kept = await next_of(customer, "chat.human")
    assert (kept["id"], kept["message"]["role"]) == (sent["id"], "user")
    state = await state_becomes(customer, "waiting")
    assert state["notice"] == "A person will join shortly. You are next in line."
    handoff = await sync_to_async(Handoff.objects.get)()
    assert handoff.reason == "typed"
    while not (items := (await next_of(desk, "agent.queue"))["items"]):
        pass
    assert (items[0]["reason"], items[0]["last_message"]) == (
        "typed",
        "can I talk to a real person please",
    )
    # the assistant was not asked, and answered only the two questions before
    assert len(scripted_worker.engine.prompts) == prompts
    assert await sync_to_async(Message.objects.filter(role="assistant").count)() == 2


@pytest.mark.usefixtures("intents_loaded")
async def test_an_answer_that_cannot_help_or_a_first_ask_for_a_person_offers_one(
    connect: Connect, alice: User, scripted_worker: RunningWorker
) -> None:
    customer = await open_socket(connect, alice)
    # the scripted engine says back what it was told ("You said: ...")
    helped = (await ask(customer, "my parcel is late"))[-1]
    assert helped["offer_person"] is False
    conversation_id = (await ask(customer, "hello"))[0]["conversation_id"]
    cannot = await ask(
        customer, "I'm sorry, but I don't have access to that.", conversation_id=conversation_id
    )
    assert cannot[-1]["offer_person"] is True
    # a new conversation's first message asking for a person: the assistant answers it (the
    # conversation did not exist to be asked in) and the page offers a person
    first = await ask(customer, "can I talk to a real person please")
    assert first[-1]["offer_person"] is True
    assert await sync_to_async(Handoff.objects.count)() == 0  # an offer, not an ask


async def test_an_approved_faq_answer_is_the_draft_when_one_matches(
    connect: Connect, alice: User, faq_worker: FaqWorker, console: Console
) -> None:
    entry = await faq_worker.entry_cached()
    dana = await sync_to_async(agent_made)("dana", "Dana")
    customer = await open_socket(connect, alice)
    conversation_id = (await ask(customer, "what are your opening hours?"))[0]["conversation_id"]
    await customer.send_json_to(handoff_frame(conversation_id))
    # a follow-up: never answered to the customer from the FAQ, but the person reads the draft
    await customer.send_json_to(
        send_frame("How do I reset my password?", conversation_id=conversation_id)
    )
    await next_of(customer, "chat.human")
    desk = await console(dana)
    await desk.send_json_to(claim_frame((await sync_to_async(Handoff.objects.get)()).pk))
    draft = []
    while (frame := await next_of(desk, "agent.draft"))["status"] == "streaming":
        draft.append(frame["text"])
    assert (frame["status"], frame["source"]) == ("done", "faq")
    assert "".join(draft) == ANSWER
    await sync_to_async(entry.refresh_from_db)()
    assert entry.hit_count == 0  # a draft is not an answer the customer got
