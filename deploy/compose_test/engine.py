"""Podman as the container engine: its settings, its Docker-compatible API socket, the images.

Podman (Debian's 4.3) runs the containers as root with runc and this folder's
`containers.conf` (`CONTAINERS_CONF`): crun fails on these machines' hybrid cgroups and the
default ulimits cannot be set. Nothing here writes to /etc.

Without systemd, podman never runs healthchecks by itself (it schedules them as systemd timers),
so `HealthDriver` runs each container's own healthcheck every few seconds, as the timers would.
"""

import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "deploy" / "compose-test"
BASE_IMAGE = "localhost/debian-base:bookworm"
# The names docker-compose.yml gives the images (Docker's default registry prefix included:
# compose asks the API for them by those names).
APP_IMAGE = "docker.io/instant-chat/app:latest"
WORKER_CPU_IMAGE = "docker.io/instant-chat/worker-cpu:latest"
TEST_IMAGES = {
    "redis": "localhost/compose-test/redis:bookworm",
    "postgres": "localhost/compose-test/postgres:bookworm",
}
# Where these machines keep the CPU build of torch (PyTorch's own index is not reachable).
LOCAL_WHEELS = Path(os.environ.get("COMPOSE_TEST_WHEELS", "/opt/wheels"))
HOST_CERTS = Path("/etc/ssl/certs")
TOOLS = {"podman": "podman", "runc": "runc", "mmdebstrap": "mmdebstrap"}


def podman_env() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(HERE / "containers.conf")}


def podman(*args: str, check: bool = True, timeout: float = 600) -> str:
    done = subprocess.run(
        ["podman", *args], env=podman_env(), capture_output=True, text=True, timeout=timeout
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args[:3])} failed: {done.stderr.strip()[-800:]}")
    return done.stdout


def run_image(image: str, *flags: str, command: list[str]) -> subprocess.CompletedProcess[str]:
    """`podman run --rm` of an image with `flags`, outside the stack."""
    return subprocess.run(
        ["podman", "run", "--rm", *flags, image, *command],
        env=podman_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def missing_tools() -> list[str]:
    return [package for tool, package in TOOLS.items() if shutil.which(tool) is None]


@contextlib.contextmanager
def api_socket() -> Iterator[str]:
    """`podman system service` on a private socket; yields its DOCKER_HOST."""
    folder = Path(tempfile.mkdtemp(prefix="compose-test-"))
    socket = folder / "podman.sock"
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{socket}"],
        env=podman_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not socket.exists():
            if time.monotonic() > deadline or service.poll() is not None:
                raise RuntimeError("podman's API service did not open its socket")
            time.sleep(0.2)
        yield f"unix://{socket}"
    finally:
        service.terminate()
        service.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


class HealthDriver:
    """Runs the healthchecks of a compose project's containers every `interval_s` seconds."""

    def __init__(self, project: str, interval_s: float = 3.0) -> None:
        self.project, self.interval_s = project, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="health-driver", daemon=True)

    def __enter__(self) -> "HealthDriver":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            listed = podman(
                "ps",
                "--filter",
                f"label=com.docker.compose.project={self.project}",
                "--format",
                "{{.ID}} {{.Status}}",
                check=False,
            )
            for line in listed.splitlines():
                container, _, status = line.partition(" ")
                if "(" in status:  # "(starting)", "(healthy)", "(unhealthy)": it has a check
                    podman("healthcheck", "run", container, check=False, timeout=60)


def leftovers(project: str) -> list[str]:
    """Containers, volumes and networks of a compose project that still exist."""
    label = f"label=com.docker.compose.project={project}"
    found = podman("ps", "--all", "--filter", label, "--format", "{{.Names}}").split()
    found += podman("volume", "ls", "--filter", label, "--format", "{{.Name}}").split()
    found += podman("network", "ls", "--filter", label, "--format", "{{.Name}}").split()
    return found


def base_image_ensure() -> str:
    """The Debian bookworm base the images build on (python3, pip), made once with mmdebstrap
    since no registry is reachable; kept between runs like any build cache."""
    if _image_exists(BASE_IMAGE):
        return "kept from an earlier run"
    with tempfile.TemporaryDirectory() as folder:
        tarball = Path(folder) / "base.tar"
        subprocess.run(
            [
                "mmdebstrap",
                "--variant=minbase",
                "--include=python3,python3-pip,python-is-python3,ca-certificates",
                # pip installs into the image's system Python, as in the python:3.11 images
                '--customize-hook=rm -f "$1"/usr/lib/python3.*/EXTERNALLY-MANAGED',
                "bookworm",
                str(tarball),
            ],
            check=True,
            capture_output=True,
            timeout=900,
        )
        podman("import", "--quiet", str(tarball), BASE_IMAGE)
    return f"made with mmdebstrap ({image_size(BASE_IMAGE)})"


def _image_exists(image: str) -> bool:
    return subprocess.run(["podman", "image", "exists", image], env=podman_env()).returncode == 0


def build_args() -> list[str]:
    """What every app image build gets: the local base, the host's CA bundle (the machines
    reach PyPI through a proxy it trusts) and, where this machine has it, its CPU torch wheel."""
    args = ["--build-arg", f"PYTHON_IMAGE={BASE_IMAGE}", "-v", f"{HOST_CERTS}:/etc/ssl/certs:ro"]
    if any(LOCAL_WHEELS.glob("torch-*+cpu-*.whl")):
        args += [
            "--build-arg",
            "TORCH_CPU_INDEX=https://pypi.org/simple",
            "--build-arg",
            "PIP_FIND_LINKS=/wheels",
            "-v",
            f"{LOCAL_WHEELS}:/wheels:ro",
        ]
    return args


def build(*, target: str, tag: str, log: Path) -> None:
    """`podman build` of one docker/Dockerfile target; its output goes to `log`."""
    command = ["-f", "docker/Dockerfile", "--target", target, "-t", tag, *build_args(), "."]
    _podman_build(command, cwd=ROOT, log=log, what=target)


def build_test_image(*, name: str, log: Path) -> None:
    command = ["-f", f"{name}.Containerfile", "-t", TEST_IMAGES[name], "."]
    _podman_build(command, cwd=HERE, log=log, what=f"the test {name} image")


def _podman_build(args: list[str], *, cwd: Path, log: Path, what: str) -> None:
    with log.open("w") as out:
        done = subprocess.run(
            ["podman", "build", *args],
            cwd=cwd,
            env=podman_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=3600,
        )
    if done.returncode != 0:
        raise RuntimeError(f"building {what} failed: see {log}")


def image_size(image: str) -> str:
    size = int(podman("image", "inspect", "--format", "{{.Size}}", image).strip())
    return f"{size / 1e9:.2f} GB" if size >= 1e9 else f"{size / 1e6:.0f} MB"
