from django.apps import AppConfig


class PromptsConfig(AppConfig):
    name = "chatapp.prompts"
    label = "prompts"
    verbose_name = "Prompt templates"
    default_auto_field = "django.db.models.BigAutoField"
