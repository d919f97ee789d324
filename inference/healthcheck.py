"""`python -m inference.healthcheck`: is the worker on this host ready and alive?

The worker touches its health file (`INFERENCE_HEALTH_FILE`) on every heartbeat that reached
Redis, and only once its model is loaded; this command exits 0 while the file is fresh. A file
rather than a port: a wedged event loop stops touching it, while a metrics thread would still
answer. Used as the container healthcheck (docker/entrypoint.sh `healthcheck-worker`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from inference.settings import WorkerSettings


def mark_alive(path: Path) -> None:
    """Create or touch the health file (called from the worker's heartbeat)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def age_s(path: Path, *, now: float | None = None) -> float | None:
    """Seconds since the worker last marked itself alive; None if it never did."""
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        return None
    return max(0.0, (time.time() if now is None else now) - mtime)


def main(argv: list[str] | None = None) -> int:
    settings = WorkerSettings.from_env()
    parser = argparse.ArgumentParser(prog="python -m inference.healthcheck", description=__doc__)
    parser.add_argument("--file", default=settings.health_file, help="INFERENCE_HEALTH_FILE")
    parser.add_argument(
        "--max-age-s",
        type=float,
        # three missed heartbeats, as the worker registry counts a worker dead
        default=max(3.0, 3 * settings.heartbeat_s),
    )
    args = parser.parse_args(argv)
    if not args.file:
        print("unhealthy: INFERENCE_HEALTH_FILE is not set", file=sys.stderr)
        return 2
    age = age_s(Path(args.file))
    if age is None:
        print(f"unhealthy: not ready yet ({args.file} does not exist)", file=sys.stderr)
        return 1
    if age > args.max_age_s:
        stale = f"last heartbeat {age:.1f} s ago (> {args.max_age_s:g} s)"
        print(f"unhealthy: {stale}", file=sys.stderr)
        return 1
    print(f"healthy: last heartbeat {age:.1f} s ago")
    return 0


if __name__ == "__main__":
    sys.exit(main())
