from django.urls import path

from chatapp.openai_api import views

urlpatterns = [
    path("chat/completions", views.chat_completions, name="openai-chat-completions"),
    path("models", views.models_list, name="openai-models"),
    path("models/<path:model>", views.model_detail, name="openai-model"),
]
