from django.contrib import admin
from django.urls import path

from chatapp.latency import views

app_name = "latency"

urlpatterns = [
    path("", admin.site.admin_view(views.latency_page), name="dashboard"),
    path("data.json", views.latency_data, name="data"),
]
