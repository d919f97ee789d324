"""Helpers for tests that run the app as real processes."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import threading
import time
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_line(proc: subprocess.Popen[str], pattern: str, timeout: float) -> str:
    """Read the process's output until a line matches; fail with the output if it dies."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                break
            continue
        seen.append(line)
        if re.search(pattern, line):
            return line
    raise AssertionError(f"no line matching {pattern!r}; output:\n{''.join(seen[-40:])}")


def login(host: str, password: str) -> str:
    with httpx.Client(base_url=f"http://{host}") as client:
        page = client.get("/accounts/login/")
        token = client.cookies["csrftoken"]
        assert page.status_code == 200
        answer = client.post(
            "/accounts/login/",
            data={
                "username": "demo",
                "password": password,
                "csrfmiddlewaretoken": token,
            },
            headers={"Referer": f"http://{host}/accounts/login/"},
        )
        assert answer.status_code == 302, answer.text[:500]
        return client.cookies["sessionid"]


async def frames_until(ws: Any, kind: str, timeout: float = 60) -> list[dict[str, Any]]:
    frames = []
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), timeout))
        frames.append(frame)
        if frame["type"] in (kind, "chat.error"):
            return frames


def keep_draining(proc: subprocess.Popen[str]) -> list[str]:
    """Keep reading a process's output in the background so a full pipe never blocks it."""
    lines: list[str] = []

    def _drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    threading.Thread(target=_drain, daemon=True).start()
    return lines
