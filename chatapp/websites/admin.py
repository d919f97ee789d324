"""Sites in Django admin: origins validated on save, the embed snippet to copy, guests listed."""

from __future__ import annotations

import contextvars
from typing import Any

from django.contrib import admin
from django.contrib.auth.models import User
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from chatapp.conversations.admin import MessageInline
from chatapp.conversations.models import Message
from chatapp.websites.models import Guest, GuestConversation, Site

# The loader's URL as the admin's browser reaches this server (the page being rendered):
# a read-only field is shown without the request.
_loader_url: contextvars.ContextVar[str] = contextvars.ContextVar("loader_url")


@admin.register(Site)
class SiteAdmin(admin.ModelAdmin[Site]):
    list_display = ("name", "key", "enabled", "origins_shown", "retention_days", "guest_count")
    list_filter = ("enabled",)
    search_fields = ("name", "key", "allowed_origins")
    readonly_fields = ("key", "embed_snippet", "created_at")
    filter_horizontal = ("offered_templates",)
    fieldsets = (
        (None, {"fields": ("name", "enabled", "allowed_origins", "key", "embed_snippet")}),
        (
            "Look and templates",
            {
                "fields": (
                    "title",
                    "greeting",
                    "accent_colour",
                    "default_template",
                    "offered_templates",
                )
            },
        ),
        (
            "Limits per visitor and per network address",
            {
                "fields": (
                    "visitor_rate",
                    "visitor_rate_window_s",
                    "visitor_max_concurrent",
                    "address_rate",
                    "address_max_concurrent",
                    "new_visitors_per_address",
                )
            },
        ),
        (
            "Team hours",
            {
                "fields": ("opening_hours", "time_zone"),
                "description": (
                    "Outside these hours a visitor asking for a person reads when the team is "
                    "back and may leave an email address (as when nobody is online)."
                ),
            },
        ),
        ("Retention", {"fields": ("retention_days", "is_example", "created_at")}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Site]:
        return super().get_queryset(request).annotate(guest_total=Count("guests"))

    @admin.display(description="origins")
    def origins_shown(self, obj: Site) -> str:
        return ", ".join(obj.allowed_origins.splitlines())

    @admin.display(description="guests")
    def guest_count(self, obj: Site) -> int:
        return int(getattr(obj, "guest_total", 0))

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        url = _loader_url.set(request.build_absolute_uri(reverse("widget-script")))
        try:
            response = super().changeform_view(request, object_id, form_url, extra_context)
            if isinstance(response, TemplateResponse):
                response.render()  # while the URL is known
            return response
        finally:
            _loader_url.reset(url)

    @admin.display(description="put this on your pages")
    def embed_snippet(self, obj: Site) -> str:
        if not obj.pk:
            return "(shown once the site is saved)"
        return format_html(
            '<code>&lt;script src="{}" data-site="{}" async&gt;&lt;/script&gt;</code>',
            _loader_url.get("https://YOUR-CHAT-HOST/widget.js"),
            obj.key,
        )


@admin.register(Guest)
class GuestAdmin(admin.ModelAdmin[Guest]):
    list_display = ("id", "site", "origin", "created_at", "last_seen_at")
    list_filter = ("site",)
    readonly_fields = ("id", "site", "user", "origin", "created_at", "last_seen_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # guests come from the widget only

    # Deleting a guest deletes its user, and with it its conversations (nothing left behind).
    def delete_model(self, request: HttpRequest, obj: Guest) -> None:
        obj.user.delete()

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Guest]) -> None:
        User.objects.filter(guest__in=queryset).delete()


@admin.register(GuestConversation)
class GuestConversationAdmin(admin.ModelAdmin[GuestConversation]):
    """What visitors asked on the websites: site, first question, how it ended, thumbs."""

    list_display = ("site", "first_question", "outcome", "thumbs", "updated_at")
    list_filter = (("owner__guest__site", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("messages__content",)
    inlines = (MessageInline,)
    fields = ("title", "owner", "created_at", "updated_at")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[GuestConversation]:
        mine = Message.objects.filter(conversation=OuterRef("pk"))
        first = mine.filter(role=Message.Role.USER).order_by("created_at")
        last = mine.filter(role=Message.Role.ASSISTANT).order_by("-created_at")
        return (
            super()
            .get_queryset(request)
            .filter(owner__guest__isnull=False)
            .select_related("owner__guest__site")
            .annotate(
                first_text=Subquery(first.values("content")[:1]),
                last_status=Subquery(last.values("status")[:1]),
                last_source=Subquery(last.values("source")[:1]),
                ups=Count("messages", filter=Q(messages__feedback="up")),
                downs=Count("messages", filter=Q(messages__feedback="down")),
            )
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="site", ordering="owner__guest__site__name")
    def site(self, obj: GuestConversation) -> str:
        return str(obj.owner.guest.site)

    @admin.display(description="first question")
    def first_question(self, obj: GuestConversation) -> str:
        return Truncator(getattr(obj, "first_text", None) or "").chars(80)

    @admin.display(description="last answer")
    def outcome(self, obj: GuestConversation) -> str:
        status = getattr(obj, "last_status", None)
        if status is None:
            return "no answer"
        return f"{status} (FAQ)" if getattr(obj, "last_source", "") == "faq" else status

    @admin.display(description="thumbs up / down")
    def thumbs(self, obj: GuestConversation) -> str:
        return f"{getattr(obj, 'ups', 0)} / {getattr(obj, 'downs', 0)}"
