"""FAQ admin: edit entries, see hits and thumbs-downs, import and export CSV, and add the
questions users asked that came close to an entry (suggested phrasings) in one click."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme

from chatapp.faq import services, worker_status
from chatapp.faq.models import FaqEntry, FaqSuggestion

MAX_CSV_BYTES = 5 * 1024 * 1024


class CsvImportForm(forms.Form):
    csv_file = forms.FileField(
        help_text="Columns: question, alternates (separated by |), answer, "
        "template (name, empty for global), enabled."
    )


@admin.register(FaqEntry)
class FaqEntryAdmin(admin.ModelAdmin[FaqEntry]):
    list_display = (
        "question",
        "scope_name",
        "enabled",
        "hit_count",
        "last_hit_at",
        "thumbs_down",
        "paused_reason",
        "embedded",
        "suggestions",
    )
    list_filter = ("enabled", "template", "is_example")
    search_fields = ("question", "alternates", "answer")
    readonly_fields = ("hit_count", "last_hit_at", "thumbs_down", "paused_reason", "embedded")
    fields = (
        "question",
        "alternates",
        "answer",
        "template",
        "enabled",
        "is_example",
        "hit_count",
        "last_hit_at",
        "thumbs_down",
        "paused_reason",
        "embedded",
    )
    change_list_template = "admin/faq/faqentry/change_list.html"

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # what decides the workers' FAQ answers now (e.g. the verifier still training)
        context = {**(extra_context or {}), "faq_workers": worker_status.current()}
        return super().changelist_view(request, extra_context=context)

    @admin.display(description="scope")
    def scope_name(self, obj: FaqEntry) -> str:
        return obj.template.name if obj.template else "global"

    def get_queryset(self, request: HttpRequest) -> QuerySet[FaqEntry]:
        return (
            super()
            .get_queryset(request)
            .annotate(open_suggestions=Count("suggestions", filter=Q(suggestions__dismissed=False)))
        )

    @admin.display(description="suggested phrasings", ordering="open_suggestions")
    def suggestions(self, obj: FaqEntry) -> str:
        count = getattr(obj, "open_suggestions", 0)
        if not count:
            return "-"
        url = reverse("admin:faq_faqsuggestion_changelist") + f"?entry__id__exact={obj.pk}"
        return format_html('<a href="{}">{} to review</a>', url, count)

    @admin.display(description="embedded", boolean=True)
    def embedded(self, obj: FaqEntry) -> bool:
        return obj.vectors is not None and obj.embedded_phrasings == obj.phrasings

    def save_model(self, request: HttpRequest, obj: FaqEntry, form: Any, change: bool) -> None:
        if obj.enabled:  # an admin looked at a paused entry and enabled it again
            obj.paused_reason = ""
        super().save_model(request, obj, form, change)
        services.faq_entry_changed(entry_id=obj.pk)

    def delete_model(self, request: HttpRequest, obj: FaqEntry) -> None:
        entry_id = obj.pk
        super().delete_model(request, obj)
        services.faq_entries_deleted(entry_ids=[entry_id])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[FaqEntry]) -> None:
        entry_ids = list(queryset.values_list("pk", flat=True))
        super().delete_queryset(request, queryset)
        services.faq_entries_deleted(entry_ids=entry_ids)

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "import-csv/",
                self.admin_site.admin_view(self.import_csv),
                name="faq_faqentry_import",
            ),
            path(
                "export-csv/",
                self.admin_site.admin_view(self.export_csv),
                name="faq_faqentry_export",
            ),
            *super().get_urls(),
        ]

    def import_csv(self, request: HttpRequest) -> HttpResponse:
        if not self.has_add_permission(request):
            return redirect("admin:faq_faqentry_changelist")
        form = CsvImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["csv_file"]
            if upload.size > MAX_CSV_BYTES:
                form.add_error("csv_file", "The file is larger than 5 MB.")
            else:
                try:
                    text = upload.read().decode("utf-8-sig")
                except UnicodeDecodeError:
                    form.add_error("csv_file", "The file is not UTF-8 text.")
                else:
                    report = services.faq_import_csv(text=text)
                    if report.errors:
                        for error in report.errors[:20]:
                            form.add_error("csv_file", error)
                    else:
                        self.message_user(
                            request,
                            f"Imported: {report.created} new, {report.updated} updated.",
                            messages.SUCCESS,
                        )
                        return redirect("admin:faq_faqentry_changelist")
        return render(
            request,
            "admin/faq/faqentry/import.html",
            {
                **self.admin_site.each_context(request),
                "form": form,
                "opts": self.model._meta,
                "title": "Import FAQ entries",
            },
        )

    def export_csv(self, request: HttpRequest) -> HttpResponse:
        # admin_view only checks is_staff; the entries are the model's data.
        if not self.has_view_permission(request):
            raise PermissionDenied
        response = HttpResponse(services.faq_export_csv(), content_type="text/csv")
        response["Content-Disposition"] = 'attachment; filename="faq.csv"'
        return response


class SuggestionStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        return [("dismissed", "dismissed"), ("all", "all")]

    def choices(self, changelist: Any) -> Any:
        # "to review" is the default, so it takes the place of Django's "All"
        for choice in super().choices(changelist):
            if choice["display"] == "All":
                choice["display"] = "to review"
            yield choice

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[FaqSuggestion]
    ) -> QuerySet[FaqSuggestion]:
        if self.value() == "all":
            return queryset
        return queryset.filter(dismissed=self.value() == "dismissed")


@admin.register(FaqSuggestion)
class FaqSuggestionAdmin(admin.ModelAdmin[FaqSuggestion]):
    """Questions users asked that may be another phrasing of an entry: near misses the model
    answered, and model answers an admin marked as an FAQ (Messages: "Suggest as a phrasing of
    the chosen FAQ entry"). Adding one re-embeds the entry and updates every worker."""

    list_display = ("question", "entry", "source", "times_asked", "last_asked_at", "buttons")
    list_filter = (SuggestionStatusFilter, "source", "entry")
    search_fields = ("question", "entry__question")
    list_select_related = ("entry",)
    actions = ("accept_selected", "dismiss_selected")
    readonly_fields = ("question", "entry", "source", "times_asked", "message", "dismissed")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # they come from traffic; an admin adds phrasings on the entry itself

    @admin.display(description="")
    def buttons(self, obj: FaqSuggestion) -> str:
        # Buttons of the change list's own form (it carries the CSRF token), posted elsewhere.
        accept = reverse("admin:faq_faqsuggestion_accept", args=[obj.pk])
        dismiss = reverse("admin:faq_faqsuggestion_dismiss", args=[obj.pk])
        if obj.dismissed:
            return format_html(
                '<button type="submit" formaction="{}">Add as alternate</button>', accept
            )
        return format_html(
            '<button type="submit" formaction="{}">Add as alternate</button> '
            '<button type="submit" formaction="{}">Dismiss</button>',
            accept,
            dismiss,
        )

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "<int:suggestion_id>/accept/",
                self.admin_site.admin_view(self.accept_view),
                name="faq_faqsuggestion_accept",
            ),
            path(
                "<int:suggestion_id>/dismiss/",
                self.admin_site.admin_view(self.dismiss_view),
                name="faq_faqsuggestion_dismiss",
            ),
            *super().get_urls(),
        ]

    def _may_edit_entries(self, request: HttpRequest) -> bool:
        return request.user.has_perm("faq.change_faqentry") and self.has_change_permission(request)

    def accept_view(self, request: HttpRequest, suggestion_id: int) -> HttpResponse:
        def accept(suggestion: FaqSuggestion) -> str:
            entry = services.faq_suggestion_accept(suggestion_id=suggestion.pk)
            return f"Added {suggestion.question!r} to {entry.question!r}."

        return self._on_suggestion(
            request, suggestion_id, allowed=self._may_edit_entries(request), act=accept
        )

    def dismiss_view(self, request: HttpRequest, suggestion_id: int) -> HttpResponse:
        def dismiss(suggestion: FaqSuggestion) -> str:
            services.faq_suggestions_dismiss(suggestion_ids=[suggestion.pk])
            return f"Dismissed {suggestion.question!r}."

        return self._on_suggestion(
            request, suggestion_id, allowed=self.has_change_permission(request), act=dismiss
        )

    def _on_suggestion(
        self,
        request: HttpRequest,
        suggestion_id: int,
        *,
        allowed: bool,
        act: Callable[[FaqSuggestion], str],
    ) -> HttpResponse:
        """A row's button: POST only, permission checked, then back to the list it was on."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not allowed:
            raise PermissionDenied
        said = act(get_object_or_404(FaqSuggestion, pk=suggestion_id))
        self.message_user(request, said, messages.SUCCESS)
        return redirect(_back(request))

    @admin.action(description="Add the selected questions as alternates of their entries")
    def accept_selected(self, request: HttpRequest, queryset: QuerySet[FaqSuggestion]) -> None:
        if not self._may_edit_entries(request):
            raise PermissionDenied
        ids = list(queryset.values_list("pk", flat=True))
        for suggestion_id in ids:
            services.faq_suggestion_accept(suggestion_id=suggestion_id)
        self.message_user(request, f"Added {len(ids)} phrasing(s).", messages.SUCCESS)

    @admin.action(description="Dismiss the selected suggestions")
    def dismiss_selected(self, request: HttpRequest, queryset: QuerySet[FaqSuggestion]) -> None:
        count = services.faq_suggestions_dismiss(
            suggestion_ids=list(queryset.values_list("pk", flat=True))
        )
        self.message_user(request, f"Dismissed {count} suggestion(s).", messages.SUCCESS)


def _back(request: HttpRequest) -> str:
    """The filtered list the button was pressed on (same site only), else the whole list."""
    referer = request.headers.get("referer", "")
    if referer and url_has_allowed_host_and_scheme(
        referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return referer
    return reverse("admin:faq_faqsuggestion_changelist")
