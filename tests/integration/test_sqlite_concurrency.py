"""`make run`'s database under three busy tabs: SQLite never says "database is locked".

The embedded default stores each answer's end on a thread of its own, while the socket's
frames read and then write on others. With SQLite's default (deferred) transactions, a
transaction that has read cannot wait for the write lock (SQLite refuses at once to avoid a
deadlock), so a follow-up, regenerate, edit or thumbs that overlapped another answer's final
write failed with "database is locked" (the user saw "unavailable").

`manage.py serve` runs as a real process on `chatapp.settings.local` with the SQLite file in
its data dir, as `make run` starts it. The scripted engine answers in milliseconds, which only
makes answer ends (and so their writes) more frequent: the defect is in the database layer.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.integration.processes import app_served, chat_socket, local_env, login, manage_run

PASSWORD = "sqlite-tabs-pw-123"
TABS = 3
ROUNDS = 8  # per tab: a follow-up, a thumbs, a regenerate and an edit each


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    data_dir = tmp_path_factory.mktemp("sqlite-tabs")
    # make run's settings: SQLite
    env = local_env(
        data_dir,
        {
            "INFERENCE_ENGINE": "scripted",
            "INFERENCE_FAQ": "0",  # the FAQ cache has no part in this; it spares loading a model
            # one user in three tabs asks more often than a person does: the per-user rate
            # limit would refuse some frames (an error, but not the one under test)
            "CHAT_USER_RATE": "100000",
            "DEMO_PASSWORD": PASSWORD,
        },
    )
    manage_run(env, ["migrate", "--noinput"], ["demo_user"])
    with app_served(env=env, ready_timeout=90) as app:
        yield f"127.0.0.1:{app.port}", app.output


@dataclass
class Tab:
    """One browser tab of the user: its socket, its conversation, and what went wrong."""

    ws: Any
    name: str
    errors: list[str] = field(default_factory=list)
    conversation_id: str | None = None
    question_id: str | None = None  # the newest question
    answer_id: str | None = None  # and its answer

    async def ask(self, frame: dict[str, Any]) -> None:
        """Send a frame that starts an answer; wait for its end."""
        await self.ws.send(json.dumps(frame))
        while True:
            reply = await self._next(frame["type"])
            if reply is None:
                return
            if reply["type"] == "chat.accepted":
                self.conversation_id = reply["conversation_id"]
                self.question_id = reply["user_message_id"]
                self.answer_id = reply["assistant_message_id"]
            elif reply["type"] == "chat.done":
                if reply["status"] != "complete":
                    self.errors.append(f"{self.name} {frame['type']}: ended {reply['status']}")
                return

    async def rate(self, rating: str) -> None:
        frame = {"type": "chat.feedback", "id": _id(), "message_id": self.answer_id}
        await self.ws.send(json.dumps({**frame, "rating": rating}))
        while (reply := await self._next("chat.feedback")) is not None:
            if reply["type"] == "chat.feedback_recorded":
                return

    async def _next(self, asked: str) -> dict[str, Any] | None:
        """The next frame; None (and an error noted) for a chat.error or silence."""
        try:
            reply: dict[str, Any] = json.loads(await asyncio.wait_for(self.ws.recv(), 30))
        except TimeoutError:
            self.errors.append(f"{self.name} {asked}: no frame for 30 s")
            return None
        if reply["type"] == "chat.error":
            self.errors.append(f"{self.name} {asked}: {reply['code']}: {reply['message']}")
            return None
        return reply


def _id() -> str:
    return str(uuid.uuid4())


async def _use(tab: Tab, rounds: int) -> None:
    """What a person does in a tab, without pauses: ask, follow up, rate, regenerate, edit."""
    await tab.ask({"type": "chat.send", "id": _id(), "text": f"hello from {tab.name}"})
    for turn in range(rounds):
        await tab.ask(
            {
                "type": "chat.send",
                "id": _id(),
                "conversation_id": tab.conversation_id,
                "text": f"{tab.name} follow-up {turn}",
            }
        )
        await tab.rate("up" if turn % 2 else "down")
        await tab.ask({"type": "chat.regenerate", "id": _id(), "message_id": tab.answer_id})
        await tab.ask(
            {
                "type": "chat.edit",
                "id": _id(),
                "message_id": tab.question_id,
                "text": f"{tab.name} edited {turn}",
            }
        )


async def test_three_tabs_asking_rating_regenerating_and_editing_see_no_error(
    served: tuple[str, list[str]],
) -> None:
    host, output = served
    session = await asyncio.to_thread(login, host, PASSWORD)
    sockets = [await chat_socket(host, session) for _ in range(TABS)]
    tabs = [Tab(ws=ws, name=f"tab{i + 1}") for i, ws in enumerate(sockets)]
    try:
        await asyncio.gather(*(_use(tab, ROUNDS) for tab in tabs))
    finally:
        for ws in sockets:
            await ws.close()
    errors = [error for tab in tabs for error in tab.errors]
    assert errors == [], f"{len(errors)} errors:\n" + "\n".join(errors)
    locked = [line for line in output if "database is locked" in line]
    assert locked == [], locked[:5]
