"""`manage.py seed_examples`: once, an example template and FAQ entries for a first try."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from chatapp.web.examples import seed_examples


class Command(BaseCommand):
    help = "Seed the example template and FAQ entries (once; marked as examples)."

    def handle(self, *args: Any, **options: Any) -> None:
        outcome = seed_examples()
        if outcome.seeded:
            self.stdout.write(
                f"Examples: {outcome.reason} (marked 'example' in the admin; delete them there)."
            )
