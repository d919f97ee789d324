"""Who is an agent: an active staff member in the "Agents" group (or a superuser).
Checked on every console request and frame, so removing someone from the group takes
effect at their next action."""

from __future__ import annotations

from django.contrib.auth.models import User

AGENTS_GROUP = "Agents"


def is_agent(user: object) -> bool:
    if not isinstance(user, User) or not user.is_active or not user.is_staff:
        return False
    return user.is_superuser or user.groups.filter(name=AGENTS_GROUP).exists()
