"""Writes for the FAQ: keep embeddings and workers in sync, count hits and thumbs-downs."""

from __future__ import annotations

import csv
import io
import uuid
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from chatapp.faq import events, selectors
from chatapp.faq.models import SUGGESTED_QUESTION_CHARS, FaqEntry, FaqSuggestion
from chatapp.prompts.models import PromptTemplate

CSV_COLUMNS = ("question", "alternates", "answer", "template", "enabled")
ALTERNATES_SEPARATOR = " | "


def faq_entry_changed(*, entry_id: int) -> None:
    """Call after an entry is saved: re-embed it (Celery) once the transaction commits."""
    from chatapp.faq.tasks import embed_faq_entry

    transaction.on_commit(lambda: embed_faq_entry.delay(entry_id))


def faq_entries_deleted(*, entry_ids: list[int]) -> None:
    transaction.on_commit(lambda: events.faq_remove_broadcast(entry_ids=entry_ids))


def faq_entry_embed(*, entry_id: int) -> None:
    """Compute the entry's vectors if its phrasings changed, then update every worker."""
    entry = FaqEntry.objects.filter(pk=entry_id).first()
    if entry is None:
        events.faq_remove_broadcast(entry_ids=[entry_id])
        return
    if not entry.enabled:
        events.faq_remove_broadcast(entry_ids=[entry.pk])
        return
    if entry.vectors is None or entry.embedded_phrasings != entry.phrasings:
        from inference.faq.embedder import shared_embedder

        phrasings = entry.phrasings
        vectors = shared_embedder().encode(phrasings)
        FaqEntry.objects.filter(pk=entry.pk).update(
            vectors=np.ascontiguousarray(vectors, dtype=np.float32).tobytes(),
            embedded_phrasings=phrasings,
        )
        entry.refresh_from_db()
    data = selectors.entry_data(entry)
    if data is not None:
        events.faq_upsert_broadcast(entries=[data])


def faq_hit_record(*, entry_id: int) -> None:
    FaqEntry.objects.filter(pk=entry_id).update(
        hit_count=F("hit_count") + 1, last_hit_at=timezone.now()
    )


def faq_thumbs_down_record(*, entry_id: int, recent: int) -> None:
    """Count a thumbs-down on the entry's answer; `recent`: thumbs-down on its answers within
    `CHAT_FAQ_THUMBS_DOWN_WINDOW_S`, this one included. At `CHAT_FAQ_THUMBS_DOWN_LIMIT` the
    entry stops answering (the workers drop it) until an admin enables it again."""
    FaqEntry.objects.filter(pk=entry_id).update(thumbs_down=F("thumbs_down") + 1)
    limit = settings.CHAT_FAQ_THUMBS_DOWN_LIMIT
    if limit <= 0 or recent < limit:
        return
    days = settings.CHAT_FAQ_THUMBS_DOWN_WINDOW_S / 86400
    reason = (
        f"Stopped answering on {timezone.now():%Y-%m-%d %H:%M} UTC: {recent} thumbs-down "
        f"within {days:g} day(s). Check the answer, then enable the entry again."
    )
    if FaqEntry.objects.filter(pk=entry_id, enabled=True).update(
        enabled=False, paused_reason=reason
    ):
        faq_entry_changed(entry_id=entry_id)  # a disabled entry is removed from the workers


def suggestion_key(question: str) -> str:
    """What makes two suggested questions the same: case and spacing aside."""
    return " ".join(question.split()).casefold()


def _is_phrasing_of(entry: FaqEntry, key: str) -> bool:
    return key in {suggestion_key(phrasing) for phrasing in entry.phrasings}


def faq_suggestion_record(
    *,
    entry_id: int,
    question: str,
    message_id: uuid.UUID,
    source: FaqSuggestion.Source,
) -> FaqSuggestion | None:
    """List `question` (the user message `message_id`) as a suggested phrasing of the entry.

    Nothing for a question the entry already has, one too long to be an FAQ phrasing, or an
    entry that is gone. Asked again: counted on the same row (kept dismissed if it was); an
    admin's mark wins over a near miss."""
    text = " ".join(question.split())
    key = suggestion_key(text)
    if not key or len(text) > SUGGESTED_QUESTION_CHARS:
        return None
    entry = FaqEntry.objects.filter(pk=entry_id).first()
    if entry is None or _is_phrasing_of(entry, key):
        return None
    with transaction.atomic():
        suggestion, created = FaqSuggestion.objects.select_for_update().get_or_create(
            entry=entry,
            key=key,
            defaults={
                "question": text,
                "source": source,
                "message_id": message_id,
            },
        )
        if not created:
            suggestion.times_asked = F("times_asked") + 1
            suggestion.message_id = message_id
            if source == FaqSuggestion.Source.MARKED:
                suggestion.source = source
            suggestion.save()
            suggestion.refresh_from_db()
    return suggestion


@transaction.atomic
def faq_suggestion_accept(*, suggestion_id: int) -> FaqEntry:
    """Add the suggested question to its entry's alternates (then embedded and pushed to the
    workers like any edit) and drop the suggestion."""
    suggestion = (
        FaqSuggestion.objects.select_for_update().select_related("entry").get(pk=suggestion_id)
    )
    entry = suggestion.entry
    if not _is_phrasing_of(entry, suggestion.key):
        entry.alternates = "\n".join(
            line for line in (*entry.alternates.splitlines(), suggestion.question) if line.strip()
        )
        entry.save(update_fields=["alternates", "updated_at"])
        faq_entry_changed(entry_id=entry.pk)
    suggestion.delete()
    return entry


def faq_suggestions_dismiss(*, suggestion_ids: list[int]) -> int:
    """Hide suggestions; asking the same question again does not bring them back."""
    return FaqSuggestion.objects.filter(pk__in=suggestion_ids).update(dismissed=True)


@dataclass
class ImportReport:
    created: int = 0
    updated: int = 0
    errors: list[str] = field(default_factory=list)


@transaction.atomic
def faq_import_csv(*, text: str) -> ImportReport:
    """Create or update entries (matched by question) from CSV with a header row.

    Nothing is written when any row is invalid: the report lists every problem.
    """
    report = ImportReport()
    reader = csv.DictReader(io.StringIO(text))
    missing = {"question", "answer"} - set(reader.fieldnames or [])
    if missing:
        report.errors.append(f"missing column(s): {', '.join(sorted(missing))}")
        return report
    rows = []
    for line, row in enumerate(reader, start=2):
        question = _from_text_cell((row.get("question") or "").strip())
        answer = _from_text_cell((row.get("answer") or "").strip())
        template_name = _from_text_cell((row.get("template") or "").strip())
        template = None
        if not question or not answer:
            report.errors.append(f"line {line}: question and answer are required")
            continue
        if len(question) > 500:
            report.errors.append(f"line {line}: question is longer than 500 characters")
            continue
        if template_name:
            template = PromptTemplate.objects.filter(name=template_name).first()
            if template is None:
                report.errors.append(f"line {line}: no template named {template_name!r}")
                continue
        enabled = (row.get("enabled") or "true").strip().lower() not in {"false", "0", "no"}
        alternates = "\n".join(
            a.strip()
            for a in _from_text_cell((row.get("alternates") or "").strip()).split("|")
            if a.strip()
        )
        rows.append((question, alternates, answer, template, enabled))
    if report.errors:
        return report
    for question, alternates, answer, template, enabled in rows:
        entry, created = FaqEntry.objects.update_or_create(
            question=question,
            defaults={
                "alternates": alternates,
                "answer": answer,
                "template": template,
                "enabled": enabled,
            },
        )
        report.created += created
        report.updated += not created
        faq_entry_changed(entry_id=entry.pk)
    return report


# A cell starting with one of these runs as a formula when the CSV is opened in a spreadsheet
# (CSV injection): exported behind an apostrophe, which spreadsheets show as text.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _as_text_cell(value: str) -> str:
    return f"'{value}" if value.startswith(_FORMULA_STARTS) else value


def _from_text_cell(value: str) -> str:
    return value[1:] if value.startswith("'") and value[1:].startswith(_FORMULA_STARTS) else value


def faq_export_csv() -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow((*CSV_COLUMNS, "hit_count", "last_hit_at", "thumbs_down"))
    for entry in FaqEntry.objects.select_related("template"):
        writer.writerow(
            (
                _as_text_cell(entry.question),
                _as_text_cell(ALTERNATES_SEPARATOR.join(entry.alternates.splitlines())),
                _as_text_cell(entry.answer),
                _as_text_cell(entry.template.name if entry.template else ""),
                "true" if entry.enabled else "false",
                entry.hit_count,
                entry.last_hit_at.isoformat() if entry.last_hit_at else "",
                entry.thumbs_down,
            )
        )
    return out.getvalue()
