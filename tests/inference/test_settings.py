"""The worker's settings: one declaration read from the environment, bad values named."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference.settings import EngineSettings, WorkerSettings


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("INFERENCE_MAX_ACTIVE", "two", "INFERENCE_MAX_ACTIVE must be an integer, got 'two'"),
        ("INFERENCE_MAX_ACTIVE", "0", "INFERENCE_MAX_ACTIVE must be at least 1, got '0'"),
        ("INFERENCE_DRAIN_S", "soon", "INFERENCE_DRAIN_S must be a number, got 'soon'"),
        ("INFERENCE_FAQ", "maybe", "INFERENCE_FAQ must be true or false, got 'maybe'"),
        ("INFERENCE_ENGINE", "gpt", "INFERENCE_ENGINE must be one of 'vllm', 'scripted' or"),
        ("INFERENCE_METRICS_PORT", "70000", "INFERENCE_METRICS_PORT must be at most 65535"),
        ("INFERENCE_HEARTBEAT_S", "0", "INFERENCE_HEARTBEAT_S must be positive, got '0'"),
    ],
)
def test_a_bad_worker_variable_stops_start_up_naming_itself(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, says: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name) as bad:
        WorkerSettings.from_env()
    assert str(bad.value).startswith(says)


def test_every_bad_variable_is_named_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERENCE_MAX_ACTIVE", "x")
    monkeypatch.setenv("INFERENCE_MAX_QUEUE", "-1")
    with pytest.raises(ValueError, match="INFERENCE_MAX_ACTIVE") as bad:
        WorkerSettings.from_env()
    assert "INFERENCE_MAX_ACTIVE must be an integer" in str(bad.value)
    assert "INFERENCE_MAX_QUEUE must be at least 0" in str(bad.value)


def test_variables_are_read_under_their_documented_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://queue:6379/0")
    monkeypatch.setenv("INFERENCE_MAX_ACTIVE", "4")
    monkeypatch.setenv("INFERENCE_FAQ", "off")
    monkeypatch.setenv("INFERENCE_DRAIN_S", "")  # empty: the default, like unset
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "6")
    monkeypatch.setenv("VLLM_BLOCK_SIZE", "0")  # 0: vLLM's own
    monkeypatch.setenv("VLLM_DTYPE", " BFloat16 ")
    worker, engine = WorkerSettings.from_env(), EngineSettings.from_env()
    assert (worker.redis_url, worker.max_active, worker.faq, worker.drain_s) == (
        "redis://queue:6379/0",
        4,
        False,
        30.0,
    )
    assert (engine.kv_cache_gib, engine.block_size, engine.dtype) == (6.0, None, "bfloat16")


def test_keyword_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERENCE_MAX_ACTIVE", "4")
    assert WorkerSettings(max_active=2, redis_url="").max_active == 2


def test_the_model_folder_is_models_default_unless_model_is_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CHAT_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("MODEL", raising=False)
    assert EngineSettings.from_env().model_dir == tmp_path / "models" / "smollm2-135m-instruct"
    assert EngineSettings.for_model(tmp_path / "tiny").model_dir == tmp_path / "tiny"
    monkeypatch.setenv("MODEL", str(tmp_path / "mine"))
    assert EngineSettings.for_model(tmp_path / "tiny").model_dir == tmp_path / "mine"
