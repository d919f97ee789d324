"""Login throttling: django-axes counts the failures; these are the two hooks it calls.

Axes is wired in settings (app, first authentication backend, middleware, AXES_*): every
`authenticate()` with a request, ours and the admin's, is refused while the username or the
client address has LOGIN_FAILURE_LIMIT failures within LOGIN_COOLOFF_S. Here: which address
is the client's (`client_ip`), and what a locked-out login sees (`lockout_response`).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.forms.utils import ErrorDict
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from chatapp.client_address import client_address


def client_ip(request: HttpRequest) -> str | None:
    """The address the failures are counted against (chatapp/client_address.py)."""
    return client_address(
        forwarded_for=request.META.get("HTTP_X_FORWARDED_FOR", ""),
        remote=request.META.get("REMOTE_ADDR"),
    )


def lockout_message() -> str:
    minutes = max(1, round(settings.AXES_COOLOFF_TIME.total_seconds() / 60))
    return (
        "Too many failed logins for this account or from this network. "
        f"Please try again in {minutes} minute{'s' if minutes != 1 else ''}."
    )


def _locked_form(base: type[AuthenticationForm]) -> type[AuthenticationForm]:
    class LockedOutForm(base):  # type: ignore[valid-type,misc]
        # The lockout is the form's only error; no field is cleaned and nothing authenticated
        # again (which would count one more failure).
        def full_clean(self) -> None:
            self._errors = ErrorDict()
            self.cleaned_data: dict[str, Any] = {}
            self.add_error(None, ValidationError(lockout_message(), code="locked_out"))

    return LockedOutForm


def lockout_response(request: HttpRequest, *_: object) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: the login page again, with the lockout as its error, 429."""
    # axes calls this as (request, original_response, credentials), or (request, credentials)
    # from its async path: neither is needed here.
    retry_after_s = int(settings.AXES_COOLOFF_TIME.total_seconds())
    data = {"username": request.POST.get("username", "")}
    if request.path == reverse("admin:login"):
        form = _locked_form(AdminAuthenticationForm)(request, data=data)
        form.is_valid()
        context: dict[str, Any] = {
            **admin.site.each_context(request),
            "title": "Log in",
            "app_path": request.get_full_path(),
            "form": form,
            "username": data["username"],
        }
        response = render(request, "admin/login.html", context, status=429)
    else:
        form = _locked_form(AuthenticationForm)(request, data=data)
        form.is_valid()
        next_url = request.POST.get("next") or request.GET.get("next", "")
        response = render(
            request, "registration/login.html", {"form": form, "next": next_url}, status=429
        )
    response["Retry-After"] = str(retry_after_s)
    return response
