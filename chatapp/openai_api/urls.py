from django.urls import path

from chatapp.openai_api import views

urlpatterns = [
    path("chat/completions", views.chat_completions, name="openai-chat-completions"),
    path("models", views.models_list, name="openai-models"),
    path("models/<path:model>", views.model_detail, name="openai-model"),
    # anything else under /v1/ answers in OpenAI's error shape, not Django's HTML page
    path("<path:rest>", views.not_found, name="openai-not-found"),
]
