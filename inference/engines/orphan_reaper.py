"""Kills a process's descendants when it dies without stopping them (kill -9, the OOM killer).

vLLM runs its engine core as a separate process, and vLLM 0.32 ties only the engine core's own
workers to it (a death pipe); nothing ties the engine core to the process that started it. A
worker killed with SIGKILL left its engine core running (seen on 2 cores: still generating the
dead worker's answer minutes later): it computes answers nobody reads, keeps its memory (on a
GPU, the memory a restarted worker needs) and starves the worker that took the answers over.

`watch_descendants()` starts this module as a small process beside the engine. It remembers the
watched process's descendants (every `interval_s`) and, once that process is gone (its parent
changes), kills the ones it remembered and exits. psutil checks each process's start time, so a
reused pid is never killed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

INTERVAL_S = 0.5

_reapers: dict[int, subprocess.Popen[bytes]] = {}  # by watched pid: one reaper per process


def watch_descendants() -> subprocess.Popen[bytes]:
    """Start the reaper of this process's descendants (once per process); it exits when this
    process has."""
    pid = os.getpid()
    if pid not in _reapers:
        _reapers[pid] = subprocess.Popen(
            [sys.executable, "-m", "inference.engines.orphan_reaper", str(pid)],
            stdin=subprocess.DEVNULL,
            # a ^C to the worker's terminal must not stop the reaper before the worker
            start_new_session=True,
        )
    return _reapers[pid]


def reap_when_gone(*, watched_pid: int, interval_s: float = INTERVAL_S) -> list[int]:
    """Wait for `watched_pid` (this process's parent) to die, then kill what it left; returns
    the pids killed."""
    known: list[psutil.Process] = []
    while os.getppid() == watched_pid:
        try:
            known = [
                proc
                for proc in psutil.Process(watched_pid).children(recursive=True)
                if proc.pid != os.getpid()
            ]
        except psutil.NoSuchProcess:
            break
        time.sleep(interval_s)
    killed: list[int] = []
    for proc in known:
        try:
            if proc.is_running():  # also false for a pid reused by a newer process
                proc.kill()
                killed.append(proc.pid)
        except psutil.NoSuchProcess:
            pass
    return killed


def main() -> None:
    killed = reap_when_gone(watched_pid=int(sys.argv[1]))
    if killed:
        print(
            f"orphan reaper: worker {sys.argv[1]} died; killed its engine processes {killed}",
            file=sys.stderr,
            flush=True,
        )


if __name__ == "__main__":
    main()
