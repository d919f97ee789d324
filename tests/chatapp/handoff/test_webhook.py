"""The handoff webhook end to end: changes and messages stored through the services reach a
real local HTTP receiver, signed (checked with the snippet docs/handoff.md gives receivers);
failures are retried with backoff and given up after the bounded attempts; a row a crash left
unsent is sent by the sweep; no webhook configured writes nothing."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from chatapp.conversations.models import Message
from chatapp.handoff import services, webhook_runner
from chatapp.handoff.models import WebhookDelivery
from chatapp.handoff.tasks import deliver_handoff_webhook, retry_handoff_webhooks
from chatapp.handoff.webhook_delivery import delivery_attempt
from chatapp.handoff.webhook_payloads import EXAMPLES_PATH, payload_adapter
from tests.chatapp.handoff.people import agent_made, conversation_made
from tests.chatapp.handoff.receiver import SECRET, Receiver, running_receiver
from tests.support.admin import superuser_client

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES: dict[str, dict[str, Any]] = json.loads(EXAMPLES_PATH.read_text(encoding="utf-8"))


@pytest.fixture
def receiver(settings: SettingsWrapper) -> Iterator[Receiver]:
    with running_receiver() as running:
        settings.CHAT_HANDOFF_WEBHOOK_URL = running.url
        settings.CHAT_HANDOFF_WEBHOOK_SECRET = SECRET
        settings.CHAT_HANDOFF_WEBHOOK_TIMEOUT_S = 1.0
        yield running
        webhook_runner.thread_drained(timeout_s=10)  # nothing runs on past this test


@pytest.fixture
def customer() -> User:
    return User.objects.create_user("carol", password="pw-carol-123", first_name="Carol")


def settled(delivery: WebhookDelivery, *, attempts: int, timeout_s: float = 10) -> None:
    """Wait until the delivery's `attempts`-th attempt has been recorded."""
    webhook_runner.thread_drained(timeout_s=timeout_s)
    delivery.refresh_from_db()
    assert delivery.attempts == attempts


def backoff_passed(delivery: WebhookDelivery) -> None:
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        next_attempt_at=timezone.now() - timedelta(seconds=1)
    )


def test_every_change_and_message_reaches_the_receiver_signed(
    receiver: Receiver, customer: User
) -> None:
    dana, eli = agent_made("dana", "Dana"), agent_made("eli", "Eli")
    conversation = conversation_made(customer)
    ask = services.handoff_request(customer=customer, conversation_id=conversation.id).handoff
    services.handoff_request(customer=customer, conversation_id=conversation.id)  # same ask
    services.handoff_contact(
        customer=customer, conversation_id=conversation.id, email="carol@example.com"
    )
    services.handoff_cancel(customer=customer, conversation_id=conversation.id)
    ask = services.handoff_request(customer=customer, conversation_id=conversation.id).handoff
    services.customer_message_store(
        customer=customer,
        conversation_id=conversation.id,
        text="still broken",
        client_id=uuid.uuid4(),
    )
    services.handoff_claim(agent=dana, handoff_id=ask.pk)
    reply_id = uuid.uuid4()
    for _ in range(2):  # a resent frame: stored once, sent once
        services.agent_message_store(
            agent=dana, handoff_id=ask.pk, text="Which order?", client_id=reply_id
        )
    services.handoff_transfer(agent=dana, handoff_id=ask.pk, to_agent=eli)
    services.handoff_release(agent=eli, handoff_id=ask.pk)
    last = services.handoff_request(customer=customer, conversation_id=conversation.id).handoff
    services.handoff_close(agent=eli, handoff_id=last.pk, resolution="Refunded.")

    got = receiver.wait_accepted(11)
    assert [r.event for r in got] == [
        "handoff.requested",
        "handoff.contact_left",
        "handoff.cancelled",
        "handoff.requested",
        "handoff.message",
        "handoff.claimed",
        "handoff.message",
        "handoff.transferred",
        "handoff.released",
        "handoff.requested",
        "handoff.closed",
    ]
    for delivery in got:
        assert delivery.signed, delivery.headers
        payload = delivery.payload
        assert payload["event"] == delivery.event
        assert payload["id"] == delivery.headers["X-Chat-Delivery"]
        assert delivery.headers["Content-Type"] == "application/json"
        # the declared schema, in the shape of the documented example
        payload_adapter.validate_python(payload)
        assert payload.keys() == EXAMPLES[delivery.event].keys()
        assert payload["conversation_id"] == str(conversation.id)
    assert len({r.payload["id"] for r in got}) == 11
    requested, contact, cancelled, _, asked, claimed, replied, moved, released, _, closed = (
        r.payload for r in got
    )
    assert (requested["state"], requested["reason"]) == ("waiting", "asked")
    assert requested["customer"] == {"id": customer.pk, "username": "carol", "name": "Carol"}
    assert contact["email"] == "carol@example.com"
    assert cancelled["state"] == "bot"
    assert (asked["message"]["author"], asked["message"]["text"]) == ("customer", "still broken")
    assert asked["message"]["agent"] is None
    assert (claimed["state"], claimed["agent"]["username"]) == ("with_agent", "dana")
    assert replied["message"]["author"] == "agent"
    assert replied["message"]["agent"]["name"] == "Dana"
    assert replied["message"]["id"] == str(Message.objects.get(client_message_id=reply_id).id)
    assert (moved["from_agent"]["username"], moved["agent"]["username"]) == ("dana", "eli")
    assert (released["state"], released["agent"]["username"]) == ("bot", "eli")
    assert (closed["state"], closed["resolution"]) == ("closed", "Refunded.")
    webhook_runner.thread_drained(timeout_s=5)
    assert set(WebhookDelivery.objects.values_list("status", "attempts")) == {("delivered", 1)}


def test_a_failed_attempt_is_retried_after_its_backoff_and_delivered_once(
    receiver: Receiver, customer: User
) -> None:
    receiver.statuses = [500]
    conversation = conversation_made(customer)
    services.handoff_request(customer=customer, conversation_id=conversation.id)
    delivery = WebhookDelivery.objects.get()
    settled(delivery, attempts=1)
    assert (delivery.status, delivery.last_error) == ("pending", "HTTP 500: ok")
    wait = (delivery.next_attempt_at - timezone.now()).total_seconds()
    assert 8 < wait <= 10  # the first backoff step
    retry_handoff_webhooks()  # not due yet: nothing sent
    webhook_runner.thread_drained(timeout_s=5)
    assert len(receiver.received) == 1

    backoff_passed(delivery)
    retry_handoff_webhooks()
    receiver.wait_accepted(1)
    settled(delivery, attempts=2)
    assert (delivery.status, delivery.last_error) == ("delivered", "")
    assert delivery.delivered_at is not None
    first, second = receiver.received
    assert first.payload == second.payload  # the same event, the same delivery id
    assert first.headers["X-Chat-Delivery"] == second.headers["X-Chat-Delivery"]
    retry_handoff_webhooks()
    webhook_runner.thread_drained(timeout_s=5)
    assert len(receiver.received) == 2


def test_a_timeout_is_a_failed_attempt(
    receiver: Receiver, customer: User, settings: SettingsWrapper
) -> None:
    settings.CHAT_HANDOFF_WEBHOOK_TIMEOUT_S = 0.3
    receiver.delay_s = 1.0
    services.handoff_request(customer=customer, conversation_id=conversation_made(customer).id)
    delivery = WebhookDelivery.objects.get()
    settled(delivery, attempts=1)
    assert delivery.status == "pending"
    assert delivery.last_error.startswith("ReadTimeout")


def test_deliveries_are_given_up_after_the_bounded_attempts(
    receiver: Receiver, customer: User, settings: SettingsWrapper
) -> None:
    settings.CHAT_HANDOFF_WEBHOOK_ATTEMPTS = 2
    receiver.statuses = [500, 503, 500]
    services.handoff_request(customer=customer, conversation_id=conversation_made(customer).id)
    delivery = WebhookDelivery.objects.get()
    settled(delivery, attempts=1)
    backoff_passed(delivery)
    retry_handoff_webhooks()
    settled(delivery, attempts=2)
    assert (delivery.status, delivery.last_error) == ("failed", "HTTP 503: ok")
    backoff_passed(delivery)
    retry_handoff_webhooks()
    webhook_runner.thread_drained(timeout_s=5)
    assert len(receiver.received) == 2  # given up: never sent again by itself


def test_a_delivery_a_crash_left_unsent_is_sent_by_the_sweep(
    receiver: Receiver, customer: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the process dies between commit and the first attempt: the row is all that is left
    monkeypatch.setattr(webhook_runner, "delivery_start", lambda pk: None)
    services.handoff_request(customer=customer, conversation_id=conversation_made(customer).id)
    monkeypatch.undo()
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("pending", 0)
    assert receiver.received == []

    retry_handoff_webhooks()  # the next process's sweep
    [got] = receiver.wait_accepted(1)
    assert got.signed
    assert got.payload["id"] == str(delivery.delivery_id)
    settled(delivery, attempts=1)
    assert delivery.status == "delivered"


def test_an_attempt_in_flight_is_not_sent_twice(receiver: Receiver, customer: User) -> None:
    """An attempt holds its row (a claim until its timeout has passed, with a margin): a sweep
    meanwhile, or the same row handed on twice, sends nothing more."""
    receiver.delay_s = 0.5
    services.handoff_request(customer=customer, conversation_id=conversation_made(customer).id)
    delivery = WebhookDelivery.objects.get()
    delivery_attempt(delivery.pk)  # while the first attempt runs, or after it: no second send
    retry_handoff_webhooks()
    settled(delivery, attempts=1)
    assert len(receiver.received) == 1


def test_no_webhook_configured_writes_and_sends_nothing(
    customer: User, settings: SettingsWrapper
) -> None:
    settings.CHAT_HANDOFF_WEBHOOK_URL = ""
    dana = agent_made("dana", "Dana")
    conversation = conversation_made(customer)
    ask = services.handoff_request(customer=customer, conversation_id=conversation.id).handoff
    services.customer_message_store(
        customer=customer, conversation_id=conversation.id, text="hi", client_id=uuid.uuid4()
    )
    services.handoff_claim(agent=dana, handoff_id=ask.pk)
    services.agent_message_store(agent=dana, handoff_id=ask.pk, text="hi", client_id=uuid.uuid4())
    services.handoff_close(agent=dana, handoff_id=ask.pk, resolution="done")
    assert not WebhookDelivery.objects.exists()
    assert webhook_runner.deliveries_due_start() == 0


def test_admin_lists_deliveries_with_their_failure_and_sends_again(
    receiver: Receiver, customer: User, settings: SettingsWrapper
) -> None:
    settings.CHAT_HANDOFF_WEBHOOK_ATTEMPTS = 1
    receiver.statuses = [502]
    services.handoff_request(customer=customer, conversation_id=conversation_made(customer).id)
    delivery = WebhookDelivery.objects.get()
    settled(delivery, attempts=1)
    client = superuser_client()
    changelist = reverse("admin:handoff_webhookdelivery_changelist")
    page = client.get(changelist, {"status": "failed"}).content.decode()
    assert "handoff.requested" in page
    assert "HTTP 502: ok" in page

    client.post(
        changelist, {"action": "send_again", "_selected_action": [delivery.pk]}, follow=True
    )
    receiver.wait_accepted(1)
    settled(delivery, attempts=1)  # counted again from the first
    assert (delivery.status, delivery.last_error) == ("delivered", "")


def test_with_a_broker_each_attempt_is_a_celery_task_and_a_broker_outage_loses_nothing(
    receiver: Receiver, customer: User, settings: SettingsWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False
    queued: list[int] = []
    monkeypatch.setattr(deliver_handoff_webhook, "delay", queued.append)
    conversation = conversation_made(customer)
    services.handoff_request(customer=customer, conversation_id=conversation.id)
    delivery = WebhookDelivery.objects.get()
    assert queued == [delivery.pk]
    assert receiver.received == []  # sent by a Celery worker, not here

    def broker_down(pk: int) -> None:
        raise ConnectionError("redis is restarting")

    monkeypatch.setattr(deliver_handoff_webhook, "delay", broker_down)
    services.handoff_cancel(customer=customer, conversation_id=conversation.id)  # not refused
    assert WebhookDelivery.objects.filter(event="handoff.cancelled", status="pending").exists()
