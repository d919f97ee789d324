"""Admin: edit the draft, preview it, see the prefix-cache lint, publish explicitly."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from chatapp.errors import ApplicationError
from chatapp.prompts import selectors, services
from chatapp.prompts.lint import lint_template
from chatapp.prompts.model_check import template_prefix_check
from chatapp.prompts.models import PromptTemplate, PromptTemplateVersion
from chatapp.prompts.rendering import TemplateError, parse_variables, render_body


class VersionInline(admin.TabularInline[PromptTemplateVersion, PromptTemplate]):
    model = PromptTemplateVersion
    fields = ("version", "sha256", "published_at", "published_by", "warm_status")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: PromptTemplate | None = None) -> bool:
        return False

    @admin.display(description="prefix cache")
    def warm_status(self, obj: PromptTemplateVersion) -> str:
        return warm_status_text(obj)


def warm_status_text(version: PromptTemplateVersion) -> str:
    if version.warmed_at is not None:
        return (
            f"warm: {version.warm_prompt_tokens} prefix tokens sent "
            f"{version.warmed_at:%Y-%m-%d %H:%M:%S}"
        )
    if version.warm_error:
        return f"not warm: {version.warm_error}"
    return "warming…"


@admin.register(PromptTemplate)
class PromptTemplateAdmin(admin.ModelAdmin[PromptTemplate]):
    list_display = ("name", "enabled", "latest_version", "draft_state", "updated_at")
    list_filter = ("enabled", "is_example")
    search_fields = ("name", "description")
    actions = ("publish",)
    readonly_fields = ("lint", "preview", "draft_state")
    fieldsets = (
        (None, {"fields": ("name", "description", "enabled", "is_example")}),
        ("Draft", {"fields": ("system_prompt", "body", "variables", "sampling")}),
        ("Check before publishing", {"fields": ("draft_state", "lint", "preview")}),
    )
    inlines = (VersionInline,)

    @admin.display(description="published")
    def latest_version(self, obj: PromptTemplate) -> str:
        latest = selectors.latest_version(template=obj)
        return f"v{latest.version} ({warm_status_text(latest)})" if latest else "never"

    @admin.display(description="draft")
    def draft_state(self, obj: PromptTemplate) -> str:
        latest = selectors.latest_version(template=obj) if obj.pk else None
        if latest is None:
            return "not published yet"
        same = (latest.system_prompt, latest.body, latest.variables, latest.sampling) == (
            obj.system_prompt,
            obj.body,
            obj.variables,
            obj.sampling,
        )
        return "same as the published version" if same else "unpublished changes"

    @admin.display(description="prefix-cache lint")
    def lint(self, obj: PromptTemplate) -> str:
        try:
            declared = {v.name for v in parse_variables(obj.variables)}
        except TemplateError as exc:
            return format_html("<strong>{}</strong>", exc.message)
        warnings = lint_template(system_prompt=obj.system_prompt, body=obj.body, declared=declared)
        stable, tokens_note = template_prefix_check(system_prompt=obj.system_prompt)
        if stable is False:
            warnings.append(tokens_note)
        if not warnings:
            return format_html("No problems: the system prompt is static. {}", tokens_note)
        return format_html(
            "<ul>{}</ul>", format_html_join("", "<li>{}</li>", ((w,) for w in warnings))
        )

    @admin.display(description="preview")
    def preview(self, obj: PromptTemplate) -> str:
        try:
            variables = parse_variables(obj.variables)
        except TemplateError:
            return "—"
        sample = {v.name: (v.choices or [f"<{v.label or v.name}>"])[0] for v in variables}
        body = render_body(obj.body, sample, declared={v.name for v in variables})
        return format_html(
            '<div style="white-space:pre-wrap"><strong>System (shared prefix):</strong>\n{}\n\n'
            "<strong>First user message (sample values):</strong>\n{}</div>",
            obj.system_prompt,
            body,
        )

    @admin.action(description="Publish the selected drafts as new versions")
    def publish(self, request: HttpRequest, queryset: QuerySet[PromptTemplate]) -> None:
        for template in queryset:
            try:
                version = services.template_publish(
                    template=template,
                    user=request.user if request.user.is_authenticated else None,
                )
            except ApplicationError as exc:
                self.message_user(request, f"{template.name}: {exc.message}", messages.WARNING)
                continue
            version.refresh_from_db()
            self.message_user(
                request,
                f"{template.name}: published v{version.version} ({warm_status_text(version)}).",
                messages.SUCCESS,
            )


@admin.register(PromptTemplateVersion)
class PromptTemplateVersionAdmin(admin.ModelAdmin[PromptTemplateVersion]):
    list_display = ("template", "version", "published_at", "warm")
    list_filter = ("template",)
    readonly_fields = (
        "template",
        "version",
        "sha256",
        "system_prompt",
        "body",
        "variables",
        "sampling",
        "published_at",
        "published_by",
        "warmed_at",
        "warm_prompt_tokens",
        "warm_error",
    )

    @admin.display(description="prefix cache")
    def warm(self, obj: PromptTemplateVersion) -> str:
        return warm_status_text(obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: PromptTemplateVersion | None = None
    ) -> bool:
        return False
