from django.apps import AppConfig


class FaqConfig(AppConfig):
    name = "chatapp.faq"
    label = "faq"
    verbose_name = "FAQ answers"
    default_auto_field = "django.db.models.BigAutoField"
