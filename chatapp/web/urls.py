from django.urls import path

from chatapp.web import views

urlpatterns = [
    path("", views.chat_page, name="chat"),
    path("c/<uuid:conversation_id>/", views.chat_page, name="conversation"),
    path("agent/", views.agent_console, name="agent-console"),
    path("healthz", views.healthz, name="healthz"),
]
