"""`manage.py demo_user`: make sure a demo account exists and print how to log in."""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Create the demo account if missing and print its credentials."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="demo")

    def handle(self, *args: Any, **options: Any) -> None:
        username: str = options["username"]
        password_file = settings.DATA_DIR / f"{username}_password"
        password = os.environ.get("DEMO_PASSWORD", "")
        if not password and password_file.exists():
            password = password_file.read_text().strip()
        if not password:
            password = secrets.token_urlsafe(9)
        user, created = User.objects.get_or_create(username=username)
        if created or not user.check_password(password):
            user.set_password(password)
            user.save()
        settings.DATA_DIR.mkdir(parents=True, exist_ok=True)
        password_file.write_text(password)
        password_file.chmod(0o600)
        self.stdout.write(
            f"Log in as '{username}' with password '{password}' (stored in {password_file})."
        )
