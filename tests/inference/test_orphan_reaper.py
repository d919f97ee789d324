"""A process killed with SIGKILL takes the processes it started with it (the engine core's case).

Real processes: a "worker" starts the reaper and a child that would run forever (as vLLM's
engine core does); the worker is killed with SIGKILL; its child must be gone soon after, and a
process the worker did not start must live on.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
import time

import psutil

WORKER = textwrap.dedent(
    """
    import subprocess, sys, time
    from inference.engines.orphan_reaper import watch_descendants
    watch_descendants()
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    time.sleep(1.5)  # the reaper has seen the engine process
    print(engine.pid, flush=True)
    time.sleep(600)
    """
)


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def test_a_worker_killed_with_sigkill_leaves_no_engine_process_behind() -> None:
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    worker = subprocess.Popen([sys.executable, "-c", WORKER], stdout=subprocess.PIPE, text=True)
    engine_pid: int | None = None
    try:
        assert worker.stdout is not None
        engine_pid = int(worker.stdout.readline())
        assert psutil.Process(engine_pid).is_running()
        worker.kill()
        worker.wait(timeout=10)
        assert gone_within(engine_pid, 5), "the dead worker's engine process is still running"
        assert bystander.poll() is None, "the reaper killed a process the worker never started"
    finally:
        for proc in (worker, bystander):
            proc.kill()
            proc.wait(timeout=10)
        if engine_pid is not None:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(engine_pid).kill()


def test_the_reaper_leaves_when_its_worker_ends_normally() -> None:
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from inference.engines.orphan_reaper import watch_descendants; "
            "print(watch_descendants().pid, flush=True)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    reaper_pid = int(worker.stdout.readline())
    worker.wait(timeout=10)
    assert gone_within(reaper_pid, 5)
