from django.apps import AppConfig


class ChatappConfig(AppConfig):
    name = "chatapp"
    label = "chatapp"
    verbose_name = "Instant Chat"
