"""Sites in Django admin: origins validated on save, the embed snippet to copy, guests listed."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from chatapp.websites.models import Guest, Site


@admin.register(Site)
class SiteAdmin(admin.ModelAdmin[Site]):
    list_display = ("name", "key", "enabled", "origins_shown", "retention_days", "guest_count")
    list_filter = ("enabled",)
    search_fields = ("name", "key", "allowed_origins")
    readonly_fields = ("key", "embed_snippet", "created_at")
    fieldsets = (
        (None, {"fields": ("name", "enabled", "allowed_origins", "key", "embed_snippet")}),
        ("Look", {"fields": ("title", "greeting", "accent_colour", "default_template")}),
        (
            "Limits per visitor",
            {
                "fields": (
                    "visitor_rate",
                    "visitor_rate_window_s",
                    "visitor_max_concurrent",
                    "new_visitors_per_address",
                )
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

    @admin.display(description="put this on your pages")
    def embed_snippet(self, obj: Site) -> str:
        if not obj.pk:
            return "(shown once the site is saved)"
        return format_html(
            '<code>&lt;script src="{}" data-site="{}" async&gt;&lt;/script&gt;</code>',
            "https://YOUR-CHAT-HOST/widget.js",
            obj.key,
        )


@admin.register(Guest)
class GuestAdmin(admin.ModelAdmin[Guest]):
    list_display = ("id", "site", "origin", "created_at", "last_seen_at")
    list_filter = ("site",)
    readonly_fields = ("id", "site", "user", "origin", "created_at", "last_seen_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # guests come from the widget only
