"""The examples `make run` seeds once: a published template, FAQ entries a worker can answer
from, and the first questions the chat page suggests; marked as examples, never seeded twice."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from chatapp.faq import selectors as faq_selectors
from chatapp.faq.models import FaqEntry
from chatapp.prompts.models import PromptTemplate
from chatapp.web.examples import MARKER_NAME, seed_examples
from chatapp.websites.models import Site
from tests.support.users import client_for

pytestmark = pytest.mark.django_db


def test_a_new_database_gets_a_published_template_and_answerable_faq_entries(
    tmp_path: Path,
) -> None:
    outcome = seed_examples(data_dir=tmp_path)
    assert outcome.seeded
    template = PromptTemplate.objects.get()
    assert template.is_example
    assert template.versions.count() == 1  # published: the picker offers it at once
    entries = list(FaqEntry.objects.all())
    assert len(entries) >= 3
    assert all(entry.is_example and entry.enabled for entry in entries)
    # embedded now: the worker's first sync serves them, no Celery round needed
    served = [faq_selectors.entry_data(entry) for entry in entries]
    assert all(data is not None for data in served)
    first = entries[0]
    assert first.vectors is not None
    vectors = np.frombuffer(first.vectors, dtype=np.float32).reshape(len(first.phrasings), -1)
    assert vectors.shape[1] == 384


def test_make_run_also_seeds_an_example_website_for_the_widget_demo(tmp_path: Path) -> None:
    outcome = seed_examples(data_dir=tmp_path, site_origins=["http://127.0.0.1:8000"])
    assert "example website" in outcome.reason
    site = Site.objects.get()
    assert site.is_example
    assert site.enabled
    assert site.origins == ("http://127.0.0.1:8000",)
    assert site.default_template == PromptTemplate.objects.get()


def test_examples_are_seeded_once_and_deleted_ones_stay_deleted(tmp_path: Path) -> None:
    assert seed_examples(data_dir=tmp_path).seeded
    FaqEntry.objects.filter(is_example=True).delete()
    again = seed_examples(data_dir=tmp_path)
    assert not again.seeded
    assert "already seeded" in again.reason
    assert not FaqEntry.objects.exists()
    assert (tmp_path / MARKER_NAME).exists()


def test_a_database_with_content_of_its_own_is_not_seeded(tmp_path: Path) -> None:
    FaqEntry.objects.create(question="Ours?", answer="Ours.")
    outcome = seed_examples(data_dir=tmp_path)
    assert not outcome.seeded
    assert FaqEntry.objects.count() == 1
    assert not PromptTemplate.objects.exists()


def test_the_command_says_what_it_seeded(
    tmp_path: Path, settings: object, capsys: pytest.CaptureFixture[str]
) -> None:
    settings.DATA_DIR = tmp_path  # type: ignore[attr-defined]
    call_command("seed_examples")
    assert "example FAQ entries" in capsys.readouterr().out
    call_command("seed_examples")
    assert capsys.readouterr().out == ""  # a later `make run` is quiet


def test_a_new_conversation_suggests_first_questions_while_the_examples_exist(
    tmp_path: Path,
) -> None:
    client = client_for(User.objects.create_user("dana", password="pw-dana-123"))
    assert 'id="first-questions"' not in client.get("/").content.decode()
    seed_examples(data_dir=tmp_path)
    page = client.get("/").content.decode()
    assert 'id="first-questions"' in page
    assert 'data-question="How do I reset my password?"' in page
    FaqEntry.objects.filter(is_example=True).delete()
    assert 'id="first-questions"' not in client.get("/").content.decode()
