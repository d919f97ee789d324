"""Customers and agents for handoff tests."""

from __future__ import annotations

from django.contrib.auth.models import Group, User

from chatapp.conversations.models import Conversation, Message
from chatapp.handoff.agents import AGENTS_GROUP


def agent_made(username: str, first_name: str = "") -> User:
    user = User.objects.create_user(username, password="pw-agent-123", first_name=first_name)
    user.is_staff = True
    user.save()
    user.groups.add(Group.objects.get_or_create(name=AGENTS_GROUP)[0])
    return user


def conversation_made(owner: User, question: str = "where is my parcel?") -> Conversation:
    conversation = Conversation.objects.create(owner=owner, title=question)
    Message.objects.create(
        conversation=conversation, role=Message.Role.USER, content=question, sender=owner
    )
    Message.objects.create(
        conversation=conversation, role=Message.Role.ASSISTANT, content="It is on its way."
    )
    return conversation
