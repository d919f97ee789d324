from django.apps import AppConfig


class MaintenanceConfig(AppConfig):
    name = "chatapp.maintenance"
    label = "maintenance"
