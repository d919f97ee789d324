from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest

from chatapp.conversations.models import Conversation, Message
from chatapp.faq import services as faq_services
from chatapp.faq.models import FaqEntry, FaqSuggestion


class MessageInline(admin.TabularInline[Message, Conversation]):
    model = Message
    fields = ("role", "status", "content", "ttft_ms", "completion_tokens", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin[Conversation]):
    list_display = ("title", "owner", "updated_at")
    search_fields = ("title", "owner__username")
    inlines = (MessageInline,)


class MessageActionForm(ActionForm):
    faq_entry = forms.ModelChoiceField(
        queryset=FaqEntry.objects.all(), required=False, label="FAQ entry"
    )


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin[Message]):
    list_display = ("role", "status", "source", "conversation", "created_at", "ttft_ms")
    list_filter = ("role", "status", "source")
    search_fields = ("content",)
    readonly_fields = ("conversation", "sender", "reply_to", "client_message_id")
    action_form = MessageActionForm
    actions = ("suggest_for_faq",)

    @admin.action(description="Suggest the question as a phrasing of the chosen FAQ entry")
    def suggest_for_faq(self, request: HttpRequest, queryset: QuerySet[Message]) -> None:
        """An admin reading a model answer sees it is FAQ X: its question (the user message,
        or the question an answer replies to) is listed under X's suggested phrasings."""
        if not request.user.has_perm("faq.change_faqentry"):
            raise PermissionDenied
        entry_id = request.POST.get("faq_entry", "")
        if not entry_id.isdigit() or not FaqEntry.objects.filter(pk=int(entry_id)).exists():
            self.message_user(request, "Choose the FAQ entry first.", messages.ERROR)
            return
        listed = 0
        for message in queryset.select_related("reply_to"):
            question = message if message.role == Message.Role.USER else message.reply_to
            if question is None:
                continue
            listed += (
                faq_services.faq_suggestion_record(
                    entry_id=int(entry_id),
                    question=question.content,
                    message_id=question.id,
                    source=FaqSuggestion.Source.MARKED,
                )
                is not None
            )
        skipped = queryset.count() - listed
        note = f" ({skipped} skipped: too long, or already a phrasing of it)" if skipped else ""
        self.message_user(request, f"Listed {listed} question(s) for review{note}.")
