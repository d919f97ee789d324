from __future__ import annotations

from django.apps import AppConfig


class LatencyConfig(AppConfig):
    name = "chatapp.latency"
    label = "latency"
    verbose_name = "Latency"

    def ready(self) -> None:
        from django.contrib import admin

        # The admin index links to the dashboard. An app template named admin/index.html
        # would only win if this app were listed before django.contrib.admin; pointing the
        # site at our template (which extends the stock one) does not depend on that order.
        admin.site.index_template = "admin/latency/admin_index.html"
