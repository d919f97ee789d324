"""Handoffs in Django admin: who asked, who took it, how it ended, and every change."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from chatapp.handoff.models import Handoff, HandoffEvent


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
