"""Prepare the app's database for the browser tests, before the app process starts.

Run as `python -m tests.e2e.seed [template] [admin]` with the app's environment (settings
module, CHAT_DATA_DIR, DEMO_PASSWORD): migrates, creates the demo user (`manage.py demo_user`),
then writes the named seeds; one process instead of three saves seconds per module.
FAQ entries are not seeded: test_faq.py adds one through Django admin, so the running app
embeds it with the model it already loaded (no second torch import) and pushes it to its worker.
"""

from __future__ import annotations

import sys

ADMIN_USERNAME = "e2e-admin"
ADMIN_PASSWORD = "e2e-admin-pw-123"
FAQ_QUESTION = "How do I reset my password?"
FAQ_ANSWER = "Go to Settings > Security and choose 'Reset password'. We email you a link."
FAQ_ALTERNATES = "I forgot my password\nCan't log in, need a new password"
# One line, long enough that a small edit travels as a patch (shorter than the text).
TEMPLATE_BODY = (
    "My order {{order_id}} has not arrived yet and the tracking page has shown the same "
    "status for a week now. I would like a {{remedy}} please, or at least a clear date when "
    "the parcel will reach me at home."
)


def template_seed() -> None:
    from chatapp.prompts import services
    from tests.chatapp.prompts.factories import template_create

    template = template_create(body=TEMPLATE_BODY, sampling={"max_tokens": 80, "temperature": 0})
    services.template_publish(template=template, user=None)


def admin_seed() -> None:
    from django.contrib.auth.models import User

    User.objects.create_superuser(ADMIN_USERNAME, password=ADMIN_PASSWORD)


def site_seed() -> None:
    """A website for the widget, allowing the origin in WIDGET_HOST_ORIGIN; its key is
    `site_e2e`, so the host page can name it before the app starts."""
    import os

    from chatapp.prompts.models import PromptTemplate
    from chatapp.websites.models import Site

    site = Site(name="E2E shop", key="site_e2e", allowed_origins=os.environ["WIDGET_HOST_ORIGIN"])
    site.full_clean()
    site.save()
    site.offered_templates.set(PromptTemplate.objects.all())  # the template seed's, if run


SEEDS = {"template": template_seed, "admin": admin_seed, "site": site_seed}


def main(names: list[str]) -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    call_command("demo_user")
    for name in names:
        SEEDS[name]()


if __name__ == "__main__":
    main(sys.argv[1:])
