"""Thin page views: read through selectors, render templates."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from chatapp.conversations import selectors
from chatapp.handoff.agents import agents_other_than, is_agent
from chatapp.web import health
from chatapp.web.examples import first_questions


@login_required
@require_GET
def chat_page(request: HttpRequest, conversation_id: uuid.UUID | None = None) -> HttpResponse:
    assert request.user.is_authenticated
    history: list[dict[str, Any]] = []
    if conversation_id is not None:
        conversation = selectors.conversation_get(
            owner=request.user, conversation_id=conversation_id
        )
        if conversation is None:
            raise Http404("No such conversation")
        history = selectors.page_history(conversation=conversation)
    return render(
        request,
        "web/chat.html",
        {
            "conversation_id": str(conversation_id) if conversation_id else "",
            "history": history,
            "conversations": selectors.conversation_list(owner=request.user),
            # a new conversation offers the examples' first questions (while they exist)
            "first_questions": [] if conversation_id else first_questions(),
        },
    )


@login_required
@require_GET
def agent_console(request: HttpRequest) -> HttpResponse:
    """The agent console (docs/handoff.md): its socket does the rest, for agents only."""
    if not is_agent(request.user):
        return render(request, "web/agent_refused.html", status=403)
    assert isinstance(request.user, User)  # is_agent said so
    return render(request, "web/agent_console.html", {"agents": agents_other_than(request.user)})


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for load balancers and the container healthcheck: 503 names what is down."""
    checks = {
        "database": "ok" if health.database_ok() else "down",
        "redis": "ok" if health.redis_ok() else "down",
    }
    healthy = all(state == "ok" for state in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "down", **checks}, status=200 if healthy else 503
    )
