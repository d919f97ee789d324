from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from chatapp.metrics import views as metrics_views
from chatapp.widget import views as widget_views

urlpatterns = [
    path("admin/latency/", include("chatapp.latency.urls")),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", include("chatapp.api.urls")),
    path("v1/", include("chatapp.openai_api.urls")),  # OpenAI-compatible API (docs/api.md)
    path("widget.js", widget_views.widget_script, name="widget-script"),
    path("widget/", include("chatapp.widget.urls")),  # the embeddable widget (docs/widget.md)
    path("metrics", metrics_views.metrics, name="metrics"),
    path("", include("chatapp.web.urls")),
]
