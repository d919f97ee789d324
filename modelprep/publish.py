"""Build a model folder next to its final place, then swap it in with one rename.

Readers either see no folder, the old complete folder, or the new complete one; a crash
mid-build leaves only a hidden `.<name>.building-*` folder that the next build deletes.
A lock file serialises concurrent builds of the same folder (e.g. two test workers).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def build_lock(*, target: Path, progress: Callable[[str], None]) -> Iterator[None]:
    target.parent.mkdir(parents=True, exist_ok=True)
    lock_path = target.parent / f".{target.name}.lock"
    with lock_path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"waiting for another build of {target} to finish ...")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def staged_dir(*, target: Path) -> Iterator[Path]:
    """Yield an empty sibling folder; on success it replaces `target`. Hold `build_lock`."""
    parent = target.parent
    for stale in [
        *parent.glob(f".{target.name}.building-*"),
        *parent.glob(f".{target.name}.old-*"),
    ]:
        shutil.rmtree(stale, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.building-", dir=parent))
    try:
        yield staging
        _make_readable(staging)
        _swap_in(staging=staging, target=target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _make_readable(folder: Path) -> None:
    # mkdtemp and some writers use 0600/0700; the worker may run as another user (containers).
    folder.chmod(0o755)
    for path in folder.iterdir():
        if path.is_file():
            path.chmod(0o644)


def _swap_in(*, staging: Path, target: Path) -> None:
    old: Path | None = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:8]}")
        target.rename(old)
    staging.rename(target)
    _fsync_dir(target.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
