"""Prepare the app's throwaway database for a load run, before its server starts.

Run as `python -m bench.load.seed --users N [--faq] [--template]` with the server's
environment (settings module, CHAT_DATA_DIR, DATABASE_URL). It migrates, then through the
app's own models and services:

* creates N users `load-0..N-1` and logs each one in (`django.test.Client.force_login`, a
  real database session), one per WebSocket the bench opens;
* `--faq`: the FAQ entries of `bench.faq_ttft.FAQS`, saved as the admin saves them
  (`faq_entry_changed`: eager Celery embeds the phrasings; the server's worker loads them
  from its startup snapshot);
* `--template`: the bench's template (`bench.load.workload.TEMPLATE`), published with
  `template_publish` (its prefix warm-up times out here, no worker runs yet; the bench's own
  warm-up requests warm the prefix instead); `--template-sampling JSON` replaces its sampling
  (the run's explicit sampling, so template requests are answered as vLLM's server is asked).

* `--api-key`: an API key of user `load-api` for the OpenAI-compatible API, with limits
  above any load the bench offers.

Prints one JSON line: {"cookies": [session ids], "api_key": the key or null}.
"""

from __future__ import annotations

import argparse
import json
import sys


def create_sessions(count: int) -> list[str]:
    from django.contrib.auth.models import User
    from django.test import Client

    cookies = []
    for i in range(count):
        user = User.objects.create_user(f"load-{i}")  # no password: nobody logs in by form
        client = Client()
        client.force_login(user)
        cookies.append(str(client.cookies["sessionid"].value))
    return cookies


def create_faq_entries() -> int:
    from bench.faq_ttft import FAQS
    from chatapp.faq import services
    from chatapp.faq.models import FaqEntry

    for faq in FAQS:
        entry = FaqEntry.objects.create(
            question=faq.question, alternates="\n".join(faq.alternates), answer=faq.answer
        )
        services.faq_entry_changed(entry_id=entry.pk)  # what the admin's save does
    return len(FAQS)


def publish_template(sampling: dict[str, object] | None = None) -> None:
    from bench.load.workload import TEMPLATE, TEMPLATE_NAME
    from chatapp.prompts import services
    from chatapp.prompts.models import PromptTemplate

    template = PromptTemplate.objects.create(
        name=TEMPLATE_NAME,
        description="Published by bench.load",
        system_prompt=TEMPLATE.system_prompt,
        body=TEMPLATE.body,
        variables=list(TEMPLATE.variables),
        sampling=dict(TEMPLATE.sampling if sampling is None else sampling),
    )
    services.template_publish(template=template, user=None)


def create_api_key(max_concurrent: int) -> str:
    from django.contrib.auth.models import User

    from chatapp.apikeys.services import api_key_create

    user = User.objects.create_user("load-api")
    issued = api_key_create(
        user=user, name="load bench", rate_limit=100_000, max_concurrent=max_concurrent
    )
    return issued.secret


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, required=True)
    parser.add_argument("--faq", action="store_true")
    parser.add_argument("--template", action="store_true")
    parser.add_argument("--api-key", action="store_true")
    parser.add_argument("--template-sampling", default=None, help="JSON: the template's sampling")
    args = parser.parse_args(argv)

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    cookies = create_sessions(args.users)
    if args.faq:
        create_faq_entries()
    if args.template:
        sampling = json.loads(args.template_sampling) if args.template_sampling else None
        publish_template(sampling)
    api_key = create_api_key(args.users) if args.api_key else None
    print(json.dumps({"cookies": cookies, "api_key": api_key}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
