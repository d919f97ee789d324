"""Handoffs in Django admin: who asked, who took it, how it ended, and every change; and the
webhook's deliveries (what was sent, how many attempts, the last error)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from chatapp.handoff import webhook_outbox
from chatapp.handoff.models import Handoff, HandoffEvent, WebhookDelivery


class HandoffEventInline(admin.TabularInline[HandoffEvent, Handoff]):
    model = HandoffEvent
    fields = ("at", "action", "state", "actor", "detail")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Handoff | None = None) -> bool:
        return False


@admin.register(Handoff)
class HandoffAdmin(admin.ModelAdmin[Handoff]):
    list_display = ("conversation", "state", "reason", "agent", "requested_at", "ended_at")
    list_filter = ("state", "reason")
    fields = (
        "conversation",
        "state",
        "reason",
        "agent",
        "requested_at",
        "claimed_at",
        "ended_at",
        "resolution",
    )
    readonly_fields = fields  # changed only from the console (chatapp.handoff.services)
    inlines = (HandoffEventInline,)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin[WebhookDelivery]):
    list_display = (
        "created_at",
        "event",
        "handoff",
        "status",
        "attempts",
        "last_error",
        "next_attempt_at",
        "delivered_at",
    )
    list_filter = ("status", "event")
    search_fields = ("delivery_id",)
    fields = (
        "delivery_id",
        "event",
        "handoff",
        "status",
        "attempts",
        "last_error",
        "created_at",
        "next_attempt_at",
        "delivered_at",
        "payload",
    )
    readonly_fields = fields  # written by chatapp.handoff.webhook_outbox and _delivery only
    actions = ("send_again",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Send again (from the first attempt)")
    def send_again(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        count = webhook_outbox.deliveries_resend(queryset.values_list("pk", flat=True))
        self.message_user(request, f"{count} deliveries will be sent again.", messages.SUCCESS)
