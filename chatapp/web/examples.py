"""Example content for a newcomer's first minute: a published template, a few FAQ entries and
the first questions the chat page suggests (`data/examples.json`).

`make run` seeds them once into a new embedded database (`manage.py seed_examples`); each is
marked `is_example` so an admin can filter and delete (or disable) them. Seeding writes a
marker in the data dir and never runs twice, so deleted examples stay deleted; a database that
already holds templates or FAQ entries of its own is never seeded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction

from chatapp.faq.models import FaqEntry
from chatapp.prompts.models import PromptTemplate
from chatapp.prompts.services import template_publish
from chatapp.websites.models import Site

EXAMPLES_PATH = Path(__file__).resolve().parent / "data" / "examples.json"
MARKER_NAME = "examples-seeded"


@dataclass(frozen=True, slots=True)
class SeedOutcome:
    seeded: bool
    reason: str


def _examples() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EXAMPLES_PATH.read_text(encoding="utf-8"))
    return data


def seed_examples(*, data_dir: Path | None = None, site_origins: Sequence[str] = ()) -> SeedOutcome:
    """Create the examples once; says why not when it does not. With `site_origins` (the
    address `make run` serves on), also an example website for the widget's demo page."""
    marker = (data_dir or settings.DATA_DIR) / MARKER_NAME
    if marker.exists():
        return SeedOutcome(False, f"already seeded once ({marker}); delete it to seed again")
    if PromptTemplate.objects.exists() or FaqEntry.objects.exists():
        return SeedOutcome(False, "the database already has templates or FAQ entries")
    examples = _examples()
    faq = examples["faq"]
    # Embedded here, once, so the worker's first FAQ sync already has the vectors.
    from inference.faq.embedder import shared_embedder

    embedder = shared_embedder()
    with transaction.atomic():
        template = PromptTemplate.objects.create(is_example=True, **examples["template"])
        template_publish(template=template, user=None, warm=False)
        for item in faq:
            phrasings = [item["question"], *item["alternates"]]
            vectors = np.ascontiguousarray(embedder.encode(phrasings), dtype=np.float32)
            FaqEntry.objects.create(
                question=item["question"],
                alternates="\n".join(item["alternates"]),
                answer=item["answer"],
                is_example=True,
                vectors=vectors.tobytes(),
                embedded_phrasings=phrasings,
            )
        site = _example_site(template, site_origins) if site_origins else None
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("The example template and FAQ entries were seeded once.\n")
    website = f", and the example website {site.name!r} for the widget demo" if site else ""
    return SeedOutcome(
        True,
        f"seeded the example template {template.name!r} and {len(faq)} example FAQ entries"
        + website,
    )


def _example_site(template: PromptTemplate, origins: Sequence[str]) -> Site:
    site = Site(
        name="Example website",
        allowed_origins="\n".join(origins),
        default_template=template,
        is_example=True,
    )
    site.full_clean()
    site.save()
    return site


def first_questions() -> list[str]:
    """What the chat page suggests for a new conversation: the examples' questions while any
    example FAQ entry is still enabled (they show an FAQ answer and a model answer); none
    once the examples are gone."""
    if not FaqEntry.objects.filter(is_example=True, enabled=True).exists():
        return []
    questions: list[str] = _examples()["first_questions"]
    return questions
