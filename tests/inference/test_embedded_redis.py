"""The embedded default's own Redis: private to its process, empty at start, and gone with the
process however it ends (a stray redis-server per `make run` would pile up otherwise)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import redis

from inference.wire.embedded_redis import embedded_redis_url
from tests.support.waiting import until

# A process that starts its embedded Redis, prints the server's pid and socket, then waits:
# for a line on stdin ("exit": then it exits), or to be signalled ("wait").
_HOLDER = """
import sys, time, psutil
from inference.wire.embedded_redis import embedded_redis_url
url = embedded_redis_url()
(server,) = [c for c in psutil.Process().children() if 'redis-server' in c.name()]
print(server.pid, url, flush=True)
if sys.argv[1] == 'wait':
    time.sleep(60)
else:
    sys.stdin.readline()
"""


def _holder(mode: str) -> tuple[subprocess.Popen[str], int, str]:
    process = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert process.stdout is not None
    pid, url = process.stdout.readline().split()
    return process, int(pid), url


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("ending", ["exit", "SIGTERM", "SIGKILL"])
async def test_the_embedded_redis_ends_with_its_process(ending: str) -> None:
    process, server, url = _holder("exit" if ending == "exit" else "wait")
    socket_dir = Path(url.removeprefix("unix://")).parent
    assert not _gone(server)
    if ending == "exit":  # only now: exiting before this check made the check race the exit
        assert process.stdin is not None
        process.stdin.write("\n")
        process.stdin.close()
    else:
        os.kill(process.pid, getattr(signal, ending))
    process.wait(timeout=10)
    await until(lambda: _gone(server), timeout_s=5)
    assert _gone(server), f"redis-server {server} outlived its process ({ending})"
    if ending == "exit":  # a signalled process leaves its (empty) temporary directory
        assert not socket_dir.exists()


def test_the_embedded_redis_listens_only_on_a_private_socket() -> None:
    url = embedded_redis_url()
    socket_path = Path(url.removeprefix("unix://"))
    assert stat.S_IMODE(socket_path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(socket_path.stat().st_mode) == 0o700
    client = redis.Redis.from_url(url)
    try:
        config = client.config_get("port")
        assert config == {"port": "0"}  # no TCP listener
        assert client.config_get("save") == {"save": ""}  # nothing written to disk
    finally:
        client.close()
    assert embedded_redis_url() == url  # one per process
    started = time.perf_counter()
    embedded_redis_url()
    assert time.perf_counter() - started < 0.01
