"""API keys in Django admin: create (the full key is shown once, on the page that answers the
add form), edit limits and priority, revoke."""

from __future__ import annotations

import weakref
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from chatapp.apikeys import services
from chatapp.apikeys.models import ApiKey

# The secret issued while saving, until `response_add` of the same request shows it.
_issued: weakref.WeakKeyDictionary[HttpRequest, str] = weakref.WeakKeyDictionary()


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin[ApiKey]):
    list_display = (
        "name",
        "masked_key",
        "user",
        "priority",
        "rate_limit",
        "rate_window_s",
        "max_concurrent",
        "active",
        "last_used_at",
    )
    list_filter = ("priority", ("revoked_at", admin.EmptyFieldListFilter))
    search_fields = ("name", "prefix", "user__username")
    fields = (
        "name",
        "user",
        "priority",
        "rate_limit",
        "rate_window_s",
        "max_concurrent",
        "masked_key",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    readonly_fields = ("masked_key", "created_at", "last_used_at", "revoked_at")
    actions = ("revoke",)

    @admin.display(description="key")
    def masked_key(self, obj: ApiKey) -> str:
        return f"ick_{obj.prefix}_…" if obj.prefix else "(made when you save)"

    @admin.display(description="active", boolean=True)
    def active(self, obj: ApiKey) -> bool:
        return obj.active

    def save_model(
        self, request: HttpRequest, obj: ApiKey, form: ModelForm[ApiKey], change: bool
    ) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        # The only time the key exists in full: it is not stored, so it cannot be shown again.
        # It goes straight into this response (`response_add`), never into a message cookie
        # or the session.
        _issued[request] = services.api_key_issue(key=obj)

    def response_add(
        self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None
    ) -> HttpResponse:
        secret = _issued.pop(request, None)
        if secret is None:  # pragma: no cover - save_model always issues one on add
            return super().response_add(request, obj, post_url_continue)
        response = TemplateResponse(
            request,
            "apikeys/created.html",
            {
                **self.admin_site.each_context(request),
                # Every variable the admin base template reads: Django's template engine logs
                # a missing one at DEBUG together with the whole context, secret included.
                "title": "New API key",
                "subtitle": None,
                "content_title": None,
                "key": obj,
                "secret": secret,
            },
        )
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke the selected keys (they stop working at once)")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        count = services.api_keys_revoke(key_ids=list(queryset.values_list("id", flat=True)))
        self.message_user(request, f"Revoked {count} key(s).", messages.SUCCESS)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Revoke instead: a deleted key's stored answers would lose who asked.
        return False
