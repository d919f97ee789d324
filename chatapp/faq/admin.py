"""FAQ admin: edit entries, see hits and thumbs-downs, import and export CSV."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import URLPattern, path

from chatapp.faq import services
from chatapp.faq.models import FaqEntry

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
    )
    list_filter = ("enabled", "template")
    search_fields = ("question", "alternates", "answer")
    readonly_fields = ("hit_count", "last_hit_at", "thumbs_down", "paused_reason", "embedded")
    fields = (
        "question",
        "alternates",
        "answer",
        "template",
        "enabled",
        "hit_count",
        "last_hit_at",
        "thumbs_down",
        "paused_reason",
        "embedded",
    )
    change_list_template = "admin/faq/faqentry/change_list.html"

    @admin.display(description="scope")
    def scope_name(self, obj: FaqEntry) -> str:
        return obj.template.name if obj.template else "global"

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
