"""What a watcher (a socket or an API request) shows of the entries that reach it: each once,
in seq order, nothing after a gap until the owner replays, nothing after the end; and, after a
"gone" or a silence, how the run ended (from its log, or its stored row)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, cast

from chatapp.answers.entries import LogEntry, LoggedDelta, LoggedEnd
from chatapp.answers.follower import (
    RunFollower,
    RunWatch,
    StoredAnswer,
    WorkerStarted,
    entries_follow,
    followed,
)
from chatapp.answers.log import Ownership
from chatapp.answers.messages import AnswerEntry, AnswerGone, AnswerStarted
from chatapp.answers.recovery import Orphans
from chatapp.conversations.models import Message

WATCHER = "socket-1"


def _watch(next_seq: int = 1) -> RunWatch:
    return RunWatch(
        message_id=uuid.uuid4(),
        run_id=uuid.uuid4(),
        owner="relay",
        client_id=None,
        next_seq=next_seq,
    )


def _deltas(*seqs: int) -> list[LogEntry]:
    return [LoggedDelta(seq=seq, text=f"<{seq}>") for seq in seqs]


def test_entries_in_order_are_shown_and_the_next_seq_moves_on() -> None:
    watch = _watch()
    followed = entries_follow(watch, _deltas(1, 2, 3), watcher=WATCHER)
    assert [entry.seq for entry in followed.show] == [1, 2, 3]
    assert followed.resync is None
    assert watch.next_seq == 4


def test_a_replay_overlapping_what_was_shown_shows_each_entry_once() -> None:
    watch = _watch(next_seq=3)  # 1 and 2 shown
    followed = entries_follow(watch, _deltas(1, 2, 3, 4), watcher=WATCHER)
    assert [entry.seq for entry in followed.show] == [3, 4]


def test_a_gap_shows_what_came_before_it_and_asks_the_owner_to_replay_once() -> None:
    watch = _watch()
    followed = entries_follow(watch, _deltas(1, 3, 4), watcher=WATCHER)
    assert [entry.seq for entry in followed.show] == [1]
    assert followed.resync is not None
    assert (followed.resync.after_seq, followed.resync.watcher) == (1, WATCHER)
    # more out-of-order entries while the replay is under way: no second request
    again = entries_follow(watch, _deltas(4), watcher=WATCHER)
    assert (again.show, again.resync) == ([], None)
    # the replay fills the gap
    replayed = entries_follow(watch, _deltas(2, 3, 4), watcher=WATCHER)
    assert [entry.seq for entry in replayed.show] == [2, 3, 4]


def test_nothing_is_shown_after_the_end() -> None:
    watch = _watch()
    entries = [*_deltas(1), LoggedEnd(seq=2, status="complete"), *_deltas(3)]
    followed = entries_follow(watch, entries, watcher=WATCHER)
    assert [type(entry) for entry in followed.show] == [LoggedDelta, LoggedEnd]


# ---- RunFollower: what the owner sends (or a silence) in, what to show out ------------------


class _Log:
    """The run's log and owner record as `run_rest` reads them."""

    def __init__(self, entries: list[LogEntry] | None, owner: Ownership | None = None) -> None:
        self.entries = entries
        self.owner = owner

    async def entries_after(self, *, run_id: uuid.UUID, seq: int) -> list[LogEntry] | None:
        return None if self.entries is None else [e for e in self.entries if e.seq > seq]

    async def ownership(self, *, run_id: uuid.UUID) -> Ownership | None:
        return self.owner


def _follower(
    *, log: _Log, row: Message | None, sent: list[tuple[str, dict[str, Any]]]
) -> RunFollower:
    watch = _watch()

    async def load_row() -> Message | None:
        return row

    async def send(channel: str, message: dict[str, Any]) -> None:
        sent.append((channel, message))

    orphans = Orphans(
        log=cast(Any, log), admission=cast(Any, None), layer=cast(Any, None), silent_after_s=5.0
    )
    return RunFollower(watch=watch, orphans=orphans, load_row=load_row, watcher=WATCHER, send=send)


def _row(follower: RunFollower, *, status: str, content: str) -> Message:
    return Message(
        id=follower.watch.message_id, run_id=follower.watch.run_id, status=status, content=content
    )


async def test_the_follower_shows_this_runs_entries_in_order_and_nothing_of_another_run() -> None:
    sent: list[tuple[str, dict[str, Any]]] = []
    follower = _follower(log=_Log([]), row=None, sent=sent)
    watch = follower.watch
    entry = AnswerEntry(message_id=watch.message_id, run_id=watch.run_id, entry=_deltas(1)[0])
    other = AnswerEntry(message_id=watch.message_id, run_id=uuid.uuid4(), entry=_deltas(2)[0])
    assert await follower.on_reply(other) == []  # a regenerate's new run is not this one
    assert [e.seq for e in await follower.on_reply(entry) if isinstance(e, LoggedDelta)] == [1]
    started = AnswerStarted(message_id=watch.message_id, run_id=watch.run_id)
    assert await follower.on_reply(started) == [WorkerStarted()]
    end = LoggedEnd(seq=2, status="complete")
    shown = await follower.on_reply(
        AnswerEntry(message_id=watch.message_id, run_id=watch.run_id, entry=end)
    )
    assert shown == [end]
    assert follower.ended
    late = AnswerEntry(message_id=watch.message_id, run_id=watch.run_id, entry=_deltas(3)[0])
    assert await follower.on_reply(late) == []
    assert sent == []


async def test_a_gap_asks_the_owner_to_replay_once() -> None:
    sent: list[tuple[str, dict[str, Any]]] = []
    follower = _follower(log=_Log([]), row=None, sent=sent)
    watch = follower.watch
    for seq in (1, 3, 4):
        await follower.on_reply(
            AnswerEntry(message_id=watch.message_id, run_id=watch.run_id, entry=_deltas(seq)[0])
        )
    assert [(channel, message["type"], message["after_seq"]) for channel, message in sent] == [
        ("relay", "answer.attach", 1)
    ]


async def test_gone_shows_the_rest_from_the_log_once_the_row_is_stored() -> None:
    sent: list[tuple[str, dict[str, Any]]] = []
    log = _Log([*_deltas(1, 2), LoggedEnd(seq=3, status="complete")])
    follower = _follower(log=log, row=None, sent=sent)
    follower.load_row = _loader(_row(follower, status="complete", content="<1><2>"))
    watch = follower.watch
    await follower.on_reply(
        AnswerEntry(message_id=watch.message_id, run_id=watch.run_id, entry=_deltas(1)[0])
    )
    shown = await follower.on_reply(AnswerGone(message_id=watch.message_id, run_id=watch.run_id))
    assert [e.seq for e in shown if isinstance(e, LogEntry)] == [2, 3]
    assert follower.ended


async def test_with_the_log_gone_the_stored_row_is_what_is_shown() -> None:
    follower = _follower(log=_Log(None), row=None, sent=[])
    follower.load_row = _loader(_row(follower, status="stopped", content="half an answer"))
    shown = await follower.check()
    assert len(shown) == 1
    stored = shown[0]
    assert isinstance(stored, StoredAnswer)
    assert (stored.content, stored.end.status) == ("half an answer", "stopped")
    assert follower.ended


async def test_a_silent_owner_that_is_alive_is_attached_again_and_nothing_ends() -> None:
    sent: list[tuple[str, dict[str, Any]]] = []
    alive = Ownership(relay_channel="relay-2", silent_s=0.1)
    follower = _follower(log=_Log([], owner=alive), row=None, sent=sent)
    follower.load_row = _loader(_row(follower, status="streaming", content=""))
    assert await follower.check() == []
    assert not follower.ended
    assert [(channel, message["type"]) for channel, message in sent] == [
        ("relay-2", "answer.attach")
    ]


async def test_followed_checks_a_silent_channel_and_ends_with_the_stored_answer(
    settings: Any,
) -> None:
    settings.CHAT_RELAY_HEARTBEAT_S = 0.05
    follower = _follower(log=_Log(None), row=None, sent=[])
    follower.load_row = _loader(_row(follower, status="complete", content="all of it"))

    async def nothing_arrives() -> dict[str, Any]:
        await asyncio.sleep(60)
        raise AssertionError("unreachable")

    shown = [item async for item in followed(follower, nothing_arrives)]
    assert len(shown) == 1
    assert isinstance(shown[0], StoredAnswer)
    assert shown[0].content == "all of it"


def _loader(row: Message | None) -> Callable[[], Awaitable[Message | None]]:
    async def load() -> Message | None:
        return row

    return load
