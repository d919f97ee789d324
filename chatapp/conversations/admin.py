from django.contrib import admin

from chatapp.conversations.models import Conversation, Message


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


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin[Message]):
    list_display = ("role", "status", "conversation", "created_at", "ttft_ms")
    list_filter = ("role", "status")
    readonly_fields = ("conversation", "sender", "reply_to", "client_message_id")
