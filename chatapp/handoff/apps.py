from django.apps import AppConfig


class HandoffConfig(AppConfig):
    name = "chatapp.handoff"
    label = "handoff"
    verbose_name = "Handoff to a person"
    default_auto_field = "django.db.models.BigAutoField"
