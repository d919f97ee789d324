from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "chatapp.web"
    label = "web"
