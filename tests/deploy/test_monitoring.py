"""The monitoring profile: Prometheus and Grafana configs agree with the app and the compose file.

Every `chat:` series the dashboard queries must be one the code registers (the prometheus_client
registry after importing the web's and the worker's metric modules), so a renamed metric breaks
this test instead of leaving an empty panel.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "latency.json"
SERIES = re.compile(r"\bchat:[A-Za-z0-9_:]+")
# What the latency dashboard is for (docs/operations.md, "Monitoring").
DASHBOARD_MUST_SHOW = {
    "chat:time_to_first_token_seconds_bucket",
    "chat:client_time_to_first_token_seconds_bucket",
    "chat:inter_token_latency_seconds_bucket",
    "chat:e2e_request_latency_seconds_bucket",
    "chat:request_queue_time_seconds_bucket",
    "chat:faq_requests_total",
    "chat:engine_prefix_cache_hits_total",
    "chat:engine_prefix_cache_queries_total",
    "chat:cached_prompt_tokens_total",
    "chat:prompt_tokens_total",
    "chat:generation_tokens_total",
    "chat:answers_total",
    "chat:active_streams",
    "chat:num_requests_waiting",
    "chat:admission_in_flight",
    "chat:errors_total",
    "chat:request_frame_bytes_total",
    "chat:request_prompt_bytes_total",
}


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def registered_series() -> set[str]:
    """Series names the app exposes: counters with `_total`, histograms' three series."""
    import chatapp.metrics.registry  # noqa: F401  (registers the web's metrics on import)
    from inference.metrics import WORKERS

    # The worker collector yields nothing in a process without a worker (the test process);
    # its describe() lists the families a worker exposes.
    families = [*REGISTRY.collect(), *WORKERS.describe()]
    names: set[str] = set()
    for family in families:
        if family.type == "counter":
            names.add(f"{family.name}_total")
        elif family.type == "histogram":
            names |= {f"{family.name}{suffix}" for suffix in ("_bucket", "_sum", "_count")}
        else:
            names.add(family.name)
    return names


def dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def test_every_metric_the_dashboard_queries_is_registered_by_the_app() -> None:
    used = {name for expr in dashboard_exprs() for name in SERIES.findall(expr)}
    assert used, "no chat: series found in the dashboard"
    assert used - registered_series() == set()


def test_the_dashboard_shows_what_operators_need() -> None:
    used = {name for expr in dashboard_exprs() for name in SERIES.findall(expr)}
    assert DASHBOARD_MUST_SHOW - used == set()


def test_quantile_panels_aggregate_buckets_by_le() -> None:
    quantile_exprs = [e for e in dashboard_exprs() if "histogram_quantile" in e]
    assert len(quantile_exprs) == 15  # P50/P95/P99 of five histograms
    for expr in quantile_exprs:
        assert re.fullmatch(
            r"histogram_quantile\(0\.(5|95|99), sum by \(le\) "
            r"\(rate\(chat:[a-z0-9_]+_bucket\[\$__rate_interval\]\)\)\)",
            expr,
        ), expr


def test_dashboard_panels_use_the_provisioned_datasource_and_do_not_overlap() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    (source,) = load_yaml(DEPLOY / "grafana/provisioning/datasources/prometheus.yml")["datasources"]
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == source["uid"], panel["title"]
        pos = panel["gridPos"]
        covered = {
            (x, y)
            for x in range(pos["x"], pos["x"] + pos["w"])
            for y in range(pos["y"], pos["y"] + pos["h"])
        }
        assert not covered & cells, f"{panel['title']} overlaps another panel"
        cells |= covered


def test_prometheus_scrapes_the_web_with_the_token_and_every_worker() -> None:
    config = load_yaml(DEPLOY / "prometheus/prometheus.yml")
    compose = load_yaml(REPO / "docker-compose.yml")
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}

    web = jobs["chat-web"]
    assert web["metrics_path"] == "/metrics"
    assert web["authorization"]["type"] == "Bearer"
    # entrypoint.sh writes compose's METRICS_TOKEN to exactly this file
    token_file = web["authorization"]["credentials_file"]
    assert f"> {token_file}" in (DEPLOY / "prometheus/entrypoint.sh").read_text()
    ((target,),) = [group["targets"] for group in web["static_configs"]]
    host, port = target.split(":")
    assert host in compose["services"]
    assert host in compose["services"]["web"]["environment"]["ALLOWED_HOSTS"].split(",")
    assert port == "8000"

    (workers,) = jobs["chat-worker"]["dns_sd_configs"]
    for name in workers["names"]:
        environment = compose["services"][name]["environment"]
        assert environment["INFERENCE_METRICS_PORT"] == str(workers["port"])
        assert environment["INFERENCE_METRICS_HOST"] == "0.0.0.0"  # noqa: S104 (inside compose)


def test_the_entrypoint_is_valid_shell() -> None:
    result = subprocess.run(
        ["sh", "-n", str(DEPLOY / "prometheus/entrypoint.sh")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", ["prometheus", "grafana"])
def test_monitoring_services_mount_existing_files_and_listen_on_loopback(name: str) -> None:
    service = load_yaml(REPO / "docker-compose.yml")["services"][name]

    assert service["profiles"] == ["monitoring"]
    assert all(port.startswith("127.0.0.1:") for port in service["ports"])
    mounts: dict[str, Path] = {}
    for volume in service["volumes"]:
        source, target, *_ = volume.split(":")
        if source.startswith("./"):
            assert (REPO / source).exists(), f"{name} mounts {source}, which does not exist"
            mounts[target] = REPO / source
    assert mounts, f"{name} mounts no configuration"

    def on_host(container_path: str) -> Path:
        for target, source in mounts.items():
            if container_path.startswith(f"{target}/"):
                return source / container_path.removeprefix(f"{target}/")
        raise AssertionError(f"{container_path} is not in a mounted folder of {name}")

    if name == "prometheus":
        assert on_host(service["entrypoint"][-1]).is_file()
        config = load_yaml(on_host("/etc/prometheus/prometheus.yml"))
        assert config["scrape_configs"]
    else:
        assert on_host(
            service["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
        ).is_file()
        (provider,) = load_yaml(on_host("/etc/grafana/provisioning/dashboards/instant-chat.yml"))[
            "providers"
        ]
        assert (on_host(provider["options"]["path"] + "/latency.json")).is_file()
        assert on_host("/etc/grafana/provisioning/datasources/prometheus.yml").is_file()
