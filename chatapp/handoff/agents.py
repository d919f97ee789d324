"""Who is an agent: an active staff member in the "Agents" group (or a superuser).
Checked on every console request and frame, so removing someone from the group takes
effect at their next action."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import Q

AGENTS_GROUP = "Agents"


def is_agent(user: object) -> bool:
    if not isinstance(user, User) or not user.is_active or not user.is_staff:
        return False
    return user.is_superuser or user.groups.filter(name=AGENTS_GROUP).exists()


def agents_other_than(user: User) -> list[tuple[str, str]]:
    """(username, name) of every other agent, by name: whom a conversation can be
    transferred to (the console offers them as the transfer field's choices)."""
    people = (
        User.objects.filter(is_active=True, is_staff=True)
        .filter(Q(is_superuser=True) | Q(groups__name=AGENTS_GROUP))
        .exclude(pk=user.pk)
        .distinct()
        .order_by("first_name", "username")
    )
    return [(p.username, p.get_full_name() or p.username) for p in people]
