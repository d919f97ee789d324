"""What asking "does this follow-up ask for a person?" adds to a send, side by side.

    .venv/bin/python -m bench.intents_send_cost [--rounds 400]

A follow-up's send reads once whether a person is involved (`selectors.person_involved`);
where none is, the socket asks `intents.PERSON_ASKED` before waking the assistant
(`realtime/handoff_socket.py`). This times that path with and without the question, the two
alternating round by round in one process (a throwaway SQLite database under a temporary
CHAT_DATA_DIR, the trained model warm), and prints medians and P95s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

TEXT = "and how long does the delivery to Norway take, roughly?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=400)
    rounds = parser.parse_args().rounds
    os.environ.setdefault("CHAT_DATA_DIR", tempfile.mkdtemp(prefix="intents-cost-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings.local")
    import django

    django.setup()
    from channels.db import database_sync_to_async
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from chatapp.conversations.models import Conversation
    from chatapp.handoff import intents, intents_training, selectors

    call_command("migrate", verbosity=0)
    owner = User.objects.create_user(f"bench-{uuid.uuid4().hex[:8]}")
    conversation = Conversation.objects.create(owner=owner, title="bench")
    models = Path(os.environ["CHAT_DATA_DIR"]) / "intents"
    intents_training.train_missing(models)
    assert intents.load(models)

    async def read_only() -> object:
        return await database_sync_to_async(selectors.person_involved)(conversation.id)

    async def read_and_ask() -> object:
        if await database_sync_to_async(selectors.person_involved)(conversation.id):
            return True
        return intents.asks_for_person(TEXT)  # inline, as the socket asks

    async def run() -> dict[str, list[float]]:
        paths: dict[str, Callable[[], Awaitable[object]]] = {
            "person_involved read": read_only,
            "read + asks for a person": read_and_ask,
        }
        for path in paths.values():
            for _ in range(20):
                await path()
        times: dict[str, list[float]] = {name: [] for name in paths}
        for i in range(rounds):
            order = list(paths.items()) if i % 2 else list(reversed(paths.items()))
            for name, path in order:
                started = time.perf_counter()
                await path()
                times[name].append((time.perf_counter() - started) * 1000.0)
        return times

    for name, values in asyncio.run(run()).items():
        values.sort()
        p95 = values[int(len(values) * 0.95)]
        print(f"{name}: median {statistics.median(values):.2f} ms, P95 {p95:.2f} ms")


if __name__ == "__main__":
    main()
