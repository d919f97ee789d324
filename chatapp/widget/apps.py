from django.apps import AppConfig


class WidgetConfig(AppConfig):
    name = "chatapp.widget"
    label = "widget"
    verbose_name = "Chat widget"
