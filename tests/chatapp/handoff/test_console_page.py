"""The agent console page: agents only; a person's messages in the chat page's history."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from django.contrib.auth.models import User
from django.test import Client

from chatapp.handoff import services
from tests.chatapp.handoff.people import agent_made, conversation_made
from tests.support.users import client_for

pytestmark = pytest.mark.django_db


def test_the_console_is_for_agents_only() -> None:
    assert Client().get("/agent/").status_code == 302  # log in first
    staff = User.objects.create_user("sam", password="pw-sam-123", is_staff=True)
    refused = client_for(staff).get("/agent/")
    assert refused.status_code == 403
    assert 'the "Agents" group' in refused.content.decode()
    page = client_for(agent_made("dana", "Dana")).get("/agent/").content.decode()
    assert 'id="agent-console"' in page
    assert 'data-socket="/ws/agent/"' in page
    assert "console.js" in page


def test_the_transfer_field_offers_the_other_agents_by_name() -> None:
    dana = agent_made("dana", "Dana")
    agent_made("eli", "Eli")
    User.objects.create_user("sam", password="pw-sam-123", is_staff=True)  # not an agent
    page = client_for(dana).get("/agent/").content.decode()
    choices = re.search(r'<datalist id="console-agents">(.*?)</datalist>', page)
    assert choices is not None
    assert choices.group(1) == '<option value="eli">Eli</option>'
    assert 'list="console-agents"' in page


def test_the_chat_page_shows_a_persons_messages_named_and_offers_a_person() -> None:
    carol = User.objects.create_user("carol", password="pw-carol-123")
    dana = agent_made("dana", "Dana")
    conversation = conversation_made(carol)
    ask = services.handoff_request(customer=carol, conversation_id=conversation.id).handoff
    services.handoff_claim(agent=dana, handoff_id=ask.pk)
    services.agent_message_store(
        agent=dana, handoff_id=ask.pk, text="Dana here, sorry!", client_id=uuid.uuid4()
    )

    page = client_for(carol).get(f"/c/{conversation.id}/").content.decode()

    raw = re.search(r'<script id="chat-history" type="application/json">(.*?)</script>', page)
    assert raw is not None
    history = json.loads(raw.group(1))
    assert history[-1] | {"id": "x"} == {
        "id": "x",
        "role": "agent",
        "content": "Dana here, sorry!",
        "status": "complete",
        "source": "model",
        "feedback": "",
        "suggested_entries": [],
        "sender": "Dana",
    }
    assert 'id="handoff-action"' in page
