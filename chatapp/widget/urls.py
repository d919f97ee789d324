from django.urls import path

from chatapp.widget import views

urlpatterns = [
    path("config", views.widget_config, name="widget-config"),
    path("panel/", views.widget_panel, name="widget-panel"),
    path("guest", views.widget_guest, name="widget-guest"),
    path("templates", views.widget_templates, name="widget-templates"),
    path("demo/", views.widget_demo, name="widget-demo"),
]
