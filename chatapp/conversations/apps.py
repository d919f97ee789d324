from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "chatapp.conversations"
    label = "conversations"
    default_auto_field = "django.db.models.BigAutoField"
