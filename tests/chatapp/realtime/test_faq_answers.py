"""FAQ answers through the socket, with the real embedding model in the worker's cache.

The worker runs the scripted engine (so a model answer is recognisable: "You said: ...") and
a real FaqCache; entries reach it the way they do in production: Celery (eager here) embeds
them and broadcasts to the workers' group, and a snapshot is served at worker start-up.
"""

from __future__ import annotations

import asyncio
import html
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.urls import reverse

from chatapp.conversations.models import Message
from chatapp.faq import services as faq_services
from chatapp.faq.models import FaqSuggestion
from chatapp.prompts import services as prompt_services
from inference.faq.deciders import FaqDecider
from tests.chatapp.prompts.factories import template_create
from tests.conftest import Connect
from tests.support.admin import superuser_client
from tests.support.faq import ANSWER, FaqWorker, entry_create, faq_worker_running
from tests.support.sockets import (
    answer_text,
    ask,
    feedback_frame,
    open_socket,
    receive_until,
    regenerate_frame,
)
from tests.support.templates import templated

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_paraphrase_is_answered_from_the_faq_at_once(
    connect: Connect, alice: User, faq_worker: FaqWorker
) -> None:
    entry = await faq_worker.entry_cached()
    ws = await open_socket(connect, alice)
    frames = await ask(ws, "how can I reset my password")

    done = frames[-1]
    assert answer_text(frames) == ANSWER
    assert (done["source"], done["faq_entry_id"]) == ("faq", entry.pk)
    message = await sync_to_async(Message.objects.get)(id=frames[0]["assistant_message_id"])
    assert (message.source, message.faq_entry_id, message.content) == ("faq", entry.pk, ANSWER)
    await sync_to_async(entry.refresh_from_db)()
    assert entry.hit_count == 1
    assert entry.last_hit_at is not None


async def test_near_misses_follow_ups_and_disabled_entries_go_to_the_model(
    connect: Connect, alice: User, faq_worker: FaqWorker
) -> None:
    entry = await faq_worker.entry_cached()
    ws = await open_socket(connect, alice)

    near_miss = await ask(ws, "how do I reset my router?")
    assert near_miss[-1]["source"] == "model"
    assert answer_text(near_miss).startswith("You said:")

    first = await ask(ws, "what are your opening hours?")
    follow_up = await ask(ws, "How do I reset my password?", first[0]["conversation_id"])
    assert follow_up[-1]["source"] == "model"  # not a standalone question

    entry.enabled = False
    await sync_to_async(entry.save)()
    await sync_to_async(faq_services.faq_entry_changed)(entry_id=entry.pk)
    await faq_worker.wait_for_entries(0)
    disabled = await ask(ws, "How do I reset my password?")
    assert disabled[-1]["source"] == "model"


async def test_template_scoped_entries_only_answer_that_templates_conversations(
    connect: Connect, alice: User, faq_worker: FaqWorker
) -> None:
    template = await sync_to_async(template_create)()
    version = await sync_to_async(prompt_services.template_publish)(template=template, user=None)
    await faq_worker.entry_cached(
        template=template,
        question="Where is my parcel?",
        alternates="My order has not arrived",
        answer="Parcels arrive within 5 working days; track yours under Orders.",
    )
    ws = await open_socket(connect, alice)

    plain = await ask(ws, "Where is my parcel?")
    assert plain[-1]["source"] == "model"

    await ws.send_json_to(templated(version, text="Where is my parcel?"))
    in_template = await receive_until(ws, "chat.done")
    assert in_template[-1]["source"] == "faq"


async def test_ask_the_assistant_instead_and_thumbs_down(
    connect: Connect, alice: User, faq_worker: FaqWorker
) -> None:
    entry = await faq_worker.entry_cached()
    ws = await open_socket(connect, alice)
    frames = await ask(ws, "I forgot my password")
    message_id = frames[0]["assistant_message_id"]
    assert frames[-1]["source"] == "faq"

    await ws.send_json_to(feedback_frame(message_id, "down"))
    recorded = await ws.receive_json_from(timeout=5)
    assert (recorded["type"], recorded["rating"]) == ("chat.feedback_recorded", "down")
    await sync_to_async(entry.refresh_from_db)()
    assert entry.thumbs_down == 1

    await ws.send_json_to(regenerate_frame(message_id, bypass_faq=True))
    again = await receive_until(ws, "chat.done")
    assert again[0]["assistant_message_id"] == message_id
    assert again[-1]["source"] == "model"
    assert answer_text(again) == "You said: I forgot my password"
    message = await sync_to_async(Message.objects.get)(id=message_id)
    assert (message.source, message.content) == ("model", "You said: I forgot my password")


async def test_a_worker_started_later_loads_existing_entries_from_a_snapshot(
    connect: Connect, alice: User, embedder: Any, faq_decider: FaqDecider
) -> None:
    await sync_to_async(entry_create)()  # embedded now; no worker is listening yet
    async with faq_worker_running(embedder, faq_decider) as running:
        await running.wait_for_entries(1)
        ws = await open_socket(connect, alice)
        frames = await ask(ws, "how do I reset my password")
        assert frames[-1]["source"] == "faq"


async def test_a_question_that_came_close_is_suggested_and_once_added_is_answered_from_the_faq(
    connect: Connect, alice: User, faq_worker: FaqWorker
) -> None:
    entry = await faq_worker.entry_cached()
    ws = await open_socket(connect, alice)
    # close (cosine 0.68 to a phrasing) but refused by the verifier (at most 0.32)
    question = "The site won't accept my password anymore"

    for _ in range(2):  # asked twice, in two new conversations
        frames = await ask(ws, question)
        assert frames[-1]["source"] == "model"
    answer = await sync_to_async(Message.objects.get)(id=frames[0]["assistant_message_id"])
    assert answer.faq_near_entry_id == entry.pk
    suggestion = await sync_to_async(FaqSuggestion.objects.get)(entry=entry)
    assert (suggestion.question, suggestion.source, suggestion.times_asked) == (
        question,
        FaqSuggestion.Source.NEAR_MISS,
        2,
    )

    admin = await sync_to_async(superuser_client)()
    page = await sync_to_async(admin.get)(reverse("admin:faq_faqsuggestion_changelist"))
    assert html.escape(question) in page.content.decode()
    accept = reverse("admin:faq_faqsuggestion_accept", args=[suggestion.pk])
    added = await sync_to_async(admin.post)(accept)
    assert added.status_code == 302

    await sync_to_async(entry.refresh_from_db)()
    assert entry.phrasings[-1] == question
    assert not await sync_to_async(FaqSuggestion.objects.filter(entry=entry).exists)()
    for _ in range(200):  # re-embedded by Celery and pushed to the worker like any edit
        if question in (faq_worker.cache.index.phrasings(entry.pk) or ()):
            break
        await asyncio.sleep(0.02)
    again = await ask(ws, question)
    assert (again[-1]["source"], again[-1]["faq_entry_id"]) == ("faq", entry.pk)
