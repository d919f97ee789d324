"""A customer asking for a person (`Handoff`: one per ask, from the ask to its end) and every
change of who answers (`HandoffEvent`: what, who, when). Messages a person writes are the
conversation's messages (`Message.Role.AGENT`)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from chatapp.conversations.models import Conversation

OPEN_STATES = ("waiting", "with_agent")


class Handoff(models.Model):
    class State(models.TextChoices):
        BOT = "bot", "back with the assistant"
        WAITING = "waiting", "waiting for a person"
        WITH_AGENT = "with_agent", "with a person"
        CLOSED = "closed", "closed"

    class Reason(models.TextChoices):
        ASKED = "asked", "the customer pressed 'Talk to a person'"
        TYPED = "typed", "the customer asked for a person in words"
        OFFERED = "offered", "the customer took the assistant's offer"

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="handoffs"
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.WAITING)
    reason = models.CharField(max_length=16, choices=Reason.choices, default=Reason.ASKED)
    agent = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="handoffs_held",
    )
    requested_at = models.DateTimeField(auto_now_add=True, db_index=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    resolution = models.TextField(blank=True)
    # Left by the customer while nobody of the team was online: write back there.
    contact_email = models.EmailField(blank=True)

    class Meta:
        ordering = ("requested_at",)
        constraints = (
            # at most one ask is open per conversation: two tabs asking at once make one
            models.UniqueConstraint(
                fields=("conversation",),
                condition=models.Q(state__in=OPEN_STATES),
                name="one_open_handoff_per_conversation",
            ),
        )

    def __str__(self) -> str:
        return f"handoff {self.pk} ({self.state})"


class HandoffEvent(models.Model):
    handoff = models.ForeignKey(Handoff, on_delete=models.CASCADE, related_name="events")
    action = models.CharField(max_length=16)  # states.Action
    state = models.CharField(max_length=16)  # the state it led to
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    detail = models.CharField(max_length=500, blank=True)  # a transfer's agent, a resolution
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("at", "id")

    def __str__(self) -> str:
        return f"{self.action} -> {self.state}"


class WebhookDelivery(models.Model):
    """One event for the team's helpdesk (docs/handoff.md#webhook): written in the transaction
    of the change it reports (an outbox: stored means it will be sent, whatever dies), then
    sent after commit and retried until accepted or given up."""

    class Status(models.TextChoices):
        PENDING = "pending", "to send"
        DELIVERED = "delivered", "delivered"
        FAILED = "failed", "given up"

    # the receiver's dedupe key: the same event sent again carries the same id
    delivery_id = models.UUIDField(unique=True, editable=False)
    event = models.CharField(max_length=32)  # webhook_payloads.EventName
    handoff = models.ForeignKey(
        Handoff, null=True, on_delete=models.SET_NULL, related_name="webhook_deliveries"
    )
    payload = models.JSONField()  # the body, as sent
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    attempts = models.PositiveIntegerField(default=0)
    # pending: when it may be tried (again); while an attempt runs, when that attempt's claim
    # lapses (its process died: the sweep tries again)
    next_attempt_at = models.DateTimeField(db_index=True)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("created_at", "id")
        verbose_name = "webhook delivery"
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"{self.event} ({self.status})"
