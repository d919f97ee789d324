from django.apps import AppConfig


class WebsitesConfig(AppConfig):
    name = "chatapp.websites"
    label = "websites"
    verbose_name = "Websites (chat widget)"
    default_auto_field = "django.db.models.BigAutoField"
