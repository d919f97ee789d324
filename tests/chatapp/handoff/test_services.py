"""Handoff writes: the ask, the claim (one winner, always), replies stored once, the end."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.contrib.auth.models import User
from django.db import connection

from chatapp.conversations.models import Message
from chatapp.errors import ApplicationError, ConflictError, NotFoundError
from chatapp.faq.models import FaqEntry
from chatapp.handoff import selectors, services
from chatapp.handoff.models import Handoff, HandoffEvent
from tests.chatapp.handoff.people import agent_made, conversation_made

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def customer() -> User:
    return User.objects.create_user("carol", password="pw-carol-123")


def test_asking_twice_is_one_ask_and_one_place_in_line(customer: User) -> None:
    first = conversation_made(customer)
    second = conversation_made(customer, "and my refund?")
    asked = services.handoff_request(customer=customer, conversation_id=first.id)
    again = services.handoff_request(customer=customer, conversation_id=first.id)
    services.handoff_request(customer=customer, conversation_id=second.id)

    ask = asked.handoff
    assert (asked.new, again.new) == (True, False)
    assert again.handoff.pk == ask.pk
    assert selectors.conversation_handoff(first.id).position == 1
    assert selectors.conversation_handoff(second.id).position == 2
    assert selectors.person_involved(first.id)
    assert [e.action for e in HandoffEvent.objects.filter(handoff=ask)] == ["request"]


def test_nobody_asks_for_a_person_in_someone_elses_conversation(customer: User) -> None:
    other = User.objects.create_user("mallory", password="pw-mallory-123")
    conversation = conversation_made(customer)
    with pytest.raises(NotFoundError):
        services.handoff_request(customer=other, conversation_id=conversation.id)
    assert not Handoff.objects.exists()


def test_a_claim_goes_to_one_agent_and_the_other_is_told_who(customer: User) -> None:
    dana, eli = agent_made("dana", "Dana"), agent_made("eli", "Eli")
    ask = services.handoff_request(
        customer=customer, conversation_id=conversation_made(customer).id
    ).handoff
    services.handoff_claim(agent=dana, handoff_id=ask.pk)
    with pytest.raises(services.ClaimLost) as lost:
        services.handoff_claim(agent=eli, handoff_id=ask.pk)
    assert lost.value.message == "Dana already took this conversation."
    view = selectors.conversation_handoff(ask.conversation_id)
    assert (view.state, view.agent, view.notice) == (
        "with_agent",
        "Dana",
        "Dana joined the conversation.",
    )


def test_two_agents_claiming_at_once_make_exactly_one_winner_every_time(customer: User) -> None:
    agents = [agent_made("dana"), agent_made("eli")]
    for _ in range(50):
        ask = services.handoff_request(
            customer=customer, conversation_id=conversation_made(customer).id
        ).handoff
        results = _claim_at_once(agents, ask.pk)
        assert sorted(type(r).__name__ for r in results) == ["ClaimLost", "Handoff"]
        winner = next(r for r in results if isinstance(r, Handoff))
        assert Handoff.objects.get(pk=ask.pk).agent_id == winner.agent_id
        assert HandoffEvent.objects.filter(handoff=ask, action="claim").count() == 1


def _claim_at_once(agents: list[User], handoff_id: int) -> list[object]:
    barrier = threading.Barrier(len(agents))
    results: list[object] = [None] * len(agents)

    def claim(i: int) -> None:
        barrier.wait()
        try:
            results[i] = services.handoff_claim(agent=agents[i], handoff_id=handoff_id)
        except services.ClaimLost as lost:
            results[i] = lost
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(agents))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_a_staff_member_who_is_not_an_agent_cannot_claim(customer: User) -> None:
    staff = User.objects.create_user("sam", password="pw-sam-123", is_staff=True)
    ask = services.handoff_request(
        customer=customer, conversation_id=conversation_made(customer).id
    ).handoff
    with pytest.raises(services.NotAgent):
        services.handoff_claim(agent=staff, handoff_id=ask.pk)
    assert Handoff.objects.get(pk=ask.pk).state == "waiting"


def test_messages_both_ways_are_stored_once_and_only_while_a_person_is_involved(
    customer: User,
) -> None:
    dana = agent_made("dana", "Dana")
    conversation = conversation_made(customer)
    sent = uuid.uuid4()
    assert (
        services.customer_message_store(
            customer=customer, conversation_id=conversation.id, text="hello?", client_id=sent
        )
        is None
    )  # nobody asked for: the assistant answers
    ask = services.handoff_request(customer=customer, conversation_id=conversation.id).handoff
    with pytest.raises(ConflictError):  # not claimed yet
        services.agent_message_store(
            agent=dana, handoff_id=ask.pk, text="Hi", client_id=uuid.uuid4()
        )
    waiting = services.customer_message_store(
        customer=customer, conversation_id=conversation.id, text="hello?", client_id=sent
    )
    again = services.customer_message_store(
        customer=customer, conversation_id=conversation.id, text="hello?", client_id=sent
    )
    services.handoff_claim(agent=dana, handoff_id=ask.pk)
    reply_id = uuid.uuid4()
    first = services.agent_message_store(
        agent=dana, handoff_id=ask.pk, text="Hi, Dana here.", client_id=reply_id
    )
    resent = services.agent_message_store(
        agent=dana, handoff_id=ask.pk, text="Hi, Dana here.", client_id=reply_id
    )
    reply = first.message
    # the person's first message says how long the customer waited; a resend says nothing
    assert first.first_response_s is not None
    assert 0 <= first.first_response_s < 60
    assert (resent.message.pk, resent.first_response_s) == (reply.pk, None)

    assert waiting is not None
    assert again is not None
    assert again.pk == waiting.pk
    assert reply.role == Message.Role.AGENT
    items = selectors.transcript(conversation.id)
    assert [(m["role"], m["content"], m["sender"]) for m in items[-2:]] == [
        ("user", "hello?", None),
        ("agent", "Hi, Dana here.", "Dana"),
    ]
    assert selectors.transcript(conversation.id, after=waiting.id) == [items[-1]]


def test_only_the_holder_replies_releases_or_closes_and_each_change_is_kept(
    customer: User,
) -> None:
    dana, eli = agent_made("dana", "Dana"), agent_made("eli", "Eli")
    conversation = conversation_made(customer)
    ask = services.handoff_request(customer=customer, conversation_id=conversation.id).handoff
    services.handoff_claim(agent=dana, handoff_id=ask.pk)
    with pytest.raises(ConflictError, match="Dana holds this conversation"):
        services.agent_message_store(
            agent=eli, handoff_id=ask.pk, text="me too", client_id=uuid.uuid4()
        )
    services.handoff_transfer(agent=dana, handoff_id=ask.pk, to_agent=eli)
    assert selectors.conversation_handoff(conversation.id).agent == "Eli"
    services.handoff_release(agent=eli, handoff_id=ask.pk)
    assert not selectors.person_involved(conversation.id)
    assert selectors.conversation_handoff(conversation.id).notice == "Back with the assistant."

    second = services.handoff_request(customer=customer, conversation_id=conversation.id).handoff
    services.handoff_claim(agent=eli, handoff_id=second.pk)
    services.handoff_close(agent=eli, handoff_id=second.pk, resolution="  refund sent ")
    closed = Handoff.objects.get(pk=second.pk)
    assert (closed.state, closed.resolution) == ("closed", "refund sent")
    events = HandoffEvent.objects.filter(handoff__conversation=conversation)
    assert [(e.action, e.state, e.actor.username if e.actor else None) for e in events] == [
        ("request", "waiting", "carol"),
        ("claim", "with_agent", "dana"),
        ("transfer", "with_agent", "dana"),
        ("release", "bot", "eli"),
        ("request", "waiting", "carol"),
        ("claim", "with_agent", "eli"),
        ("close", "closed", "eli"),
    ]


def test_the_customer_may_stop_waiting(customer: User) -> None:
    conversation = conversation_made(customer)
    services.handoff_request(customer=customer, conversation_id=conversation.id)
    services.handoff_cancel(customer=customer, conversation_id=conversation.id)
    assert selectors.conversation_handoff(conversation.id).state == "bot"
    with pytest.raises(ConflictError):
        services.handoff_cancel(customer=customer, conversation_id=conversation.id)


def test_the_queue_lists_waiting_conversations_longest_first_with_what_they_asked(
    customer: User,
) -> None:
    dana = agent_made("dana", "Dana")
    first = conversation_made(customer, "where is my parcel?")
    second = conversation_made(customer, "can I return shoes?")
    a = services.handoff_request(customer=customer, conversation_id=first.id).handoff
    services.handoff_request(customer=customer, conversation_id=second.id)
    services.handoff_claim(agent=dana, handoff_id=a.pk)

    rows = selectors.queue(agent_id=dana.pk)

    assert [(r["first_question"], r["state"], r["mine"]) for r in rows] == [
        ("where is my parcel?", "with_agent", True),
        ("can I return shoes?", "waiting", False),
    ]
    assert rows[1]["last_message"] == "It is on its way."
    assert rows[1]["customer"] == "carol"


def test_the_queue_names_the_faq_entries_a_conversation_came_close_to(customer: User) -> None:
    entries = [
        FaqEntry.objects.create(question=q, answer="...")
        for q in ("How do I reset my password?", "Where is my parcel?", "Can I return shoes?")
    ]
    conversation = conversation_made(customer)
    answers = Message.objects.filter(conversation=conversation, role="assistant")
    answers.update(faq_near_entry=entries[1])
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="...",
        faq_entry=entries[0],
        suggested_entries=[
            {"entry_id": entries[1].pk, "question": entries[1].question},
            {"entry_id": entries[2].pk, "question": entries[2].question},
        ],
    )
    services.handoff_request(customer=customer, conversation_id=conversation.id)
    quiet = conversation_made(User.objects.create_user("dave"))
    services.handoff_request(customer=quiet.owner, conversation_id=quiet.id)

    near, none = (r["near_entries"] for r in selectors.queue())

    # oldest answer first, each entry once, at most three
    assert near == ["Where is my parcel?", "How do I reset my password?", "Can I return shoes?"]
    assert none == []


def test_a_waiting_customer_leaves_an_email_address_kept_with_the_ask(customer: User) -> None:
    conversation = conversation_made(customer)
    with pytest.raises(ConflictError):  # nobody asked for yet
        services.handoff_contact(
            customer=customer, conversation_id=conversation.id, email="a@b.example"
        )
    ask = services.handoff_request(customer=customer, conversation_id=conversation.id).handoff
    with pytest.raises(ApplicationError, match="does not look like an email"):
        services.handoff_contact(customer=customer, conversation_id=conversation.id, email="x@")
    services.handoff_contact(
        customer=customer, conversation_id=conversation.id, email=" a@b.example "
    )
    assert Handoff.objects.get(pk=ask.pk).contact_email == "a@b.example"
    assert selectors.queue()[0]["contact_email"] == "a@b.example"
    assert selectors.conversation_handoff(conversation.id).notice == (
        "Thank you! The team will write to you at a@b.example."
    )
    assert HandoffEvent.objects.filter(handoff=ask, action="contact").count() == 1
