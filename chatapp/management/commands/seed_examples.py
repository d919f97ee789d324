"""`manage.py seed_examples`: once, an example template and FAQ entries for a first try."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from chatapp.web.examples import seed_examples


class Command(BaseCommand):
    help = "Seed the example template and FAQ entries (once; marked as examples)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--site-origin",
            action="append",
            default=[],
            help="Also seed an example website allowing this origin (the widget demo page).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        outcome = seed_examples(site_origins=options["site_origin"])
        if outcome.seeded:
            self.stdout.write(
                f"Examples: {outcome.reason} (marked 'example' in the admin; delete them there)."
            )
