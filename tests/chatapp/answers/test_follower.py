"""What a watcher (a socket or an API request) shows of the entries that reach it: each once,
in seq order, nothing after a gap until the owner replays, nothing after the end."""

from __future__ import annotations

import uuid

from chatapp.answers.entries import LogEntry, LoggedDelta, LoggedEnd
from chatapp.answers.follower import RunWatch, entries_follow

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
