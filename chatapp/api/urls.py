from django.urls import path

from chatapp.api import views

urlpatterns = [
    path("templates/", views.templates_list, name="api-templates"),
    path("conversations/", views.conversations_list, name="api-conversations"),
]
