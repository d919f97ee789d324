"""SQLite as `make run` configures it: a transaction that reads, then writes, while another
connection writes, waits its turn instead of failing with "database is locked".

Two threads, each with its own connection to one SQLite file (as Django gives every thread):
a socket's frame (reads, then writes, in one `atomic`) and an answer's final write. With
SQLite's default DEFERRED transactions the frame holds a read lock, the store takes the write
lock and waits for that read lock to go, and the frame's write then fails at once: SQLite
refuses to let it wait (both would wait forever). The whole test takes well under a second.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import transaction
from django.db.utils import ConnectionHandler

from chatapp.settings.database import database_settings


@pytest.fixture
def connections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, django_db_blocker: object
) -> Iterator[ConnectionHandler]:
    """`make run`'s database settings on a file of our own, used by `transaction.atomic`."""
    monkeypatch.delenv("DATABASE_URL", raising=False)
    handler = ConnectionHandler({"default": database_settings(data_dir=tmp_path)})
    monkeypatch.setattr(transaction, "connections", handler)
    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        with handler["default"].cursor() as cursor:
            cursor.execute("CREATE TABLE answer (id INTEGER PRIMARY KEY, text TEXT)")
            cursor.execute("INSERT INTO answer VALUES (1, ''), (2, '')")
        yield handler
        handler.close_all()


def _on_thread(
    connections: ConnectionHandler, work: Callable[[], None], errors: list[str]
) -> threading.Thread:
    def run() -> None:
        try:
            work()
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            connections["default"].close()  # this thread's connection

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_frame_that_reads_then_writes_waits_for_an_answers_store(
    connections: ConnectionHandler,
) -> None:
    errors: list[str] = []
    frame_has_read = threading.Event()

    def frame() -> None:  # e.g. a regenerate: look at the answer, then clear it
        with transaction.atomic(), connections["default"].cursor() as cursor:
            cursor.execute("SELECT text FROM answer WHERE id = 1")
            cursor.fetchall()
            frame_has_read.set()
            time.sleep(0.3)  # the other answer's store comes in now
            cursor.execute("UPDATE answer SET text = 'cleared' WHERE id = 1")

    def store() -> None:  # another answer ends: its one final write
        frame_has_read.wait(5)
        with transaction.atomic(), connections["default"].cursor() as cursor:
            cursor.execute("UPDATE answer SET text = 'stored' WHERE id = 2")

    threads = [_on_thread(connections, work, errors) for work in (frame, store)]
    for thread in threads:
        thread.join(30)
    assert errors == []
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT text FROM answer ORDER BY id")
        assert [row[0] for row in cursor.fetchall()] == ["cleared", "stored"]


def test_sqlite_waits_for_the_write_lock_and_takes_it_at_begin(tmp_path: Path) -> None:
    options = database_settings(data_dir=tmp_path)["OPTIONS"]
    assert options["transaction_mode"] == "IMMEDIATE"
    assert options["timeout"] >= 5  # Python's default; a queue of writes may take longer


@pytest.mark.django_db(transaction=True)
def test_the_test_database_lets_a_read_through_while_another_thread_writes() -> None:
    """The tests' SQLite behaves like `make run`'s file: a read while another connection holds
    an open write transaction sees the last committed rows. Django's default test database (an
    in-memory, shared-cache one) fails that read at once with "database table is locked"
    instead, which made tests that read while an answer was being stored fail by chance."""
    from django.contrib.auth.models import Group
    from django.db import connection

    writing, read_done = threading.Event(), threading.Event()
    errors: list[str] = []

    def writer() -> None:
        try:
            with transaction.atomic():
                Group.objects.create(name="being written")
                writing.set()
                read_done.wait(5)
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            connection.close()

    thread = threading.Thread(target=writer)
    thread.start()
    writing.wait(5)
    try:
        names = list(Group.objects.values_list("name", flat=True))
    finally:
        read_done.set()
        thread.join(10)
    assert names == []
    assert errors == []
