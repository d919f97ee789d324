"""The big-model knobs: read from the environment, passed to vLLM, and refused at start (with
the setting named and what to do) when this build cannot do them, before any model loads."""

from __future__ import annotations

import pytest

from inference.__main__ import main
from inference.engines.base import EngineError
from inference.engines.vllm_options import scale_engine_args, vllm_scale_engine_args
from inference.settings import ScaleOptions

METHODS = ["awq", "fp8", "gptq"]


def test_a_gpu_build_gets_every_knob_as_vllm_engine_arguments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VLLM_TENSOR_PARALLEL_SIZE", "4")
    monkeypatch.setenv("VLLM_GPU_MEMORY_UTILIZATION", "0.85")
    monkeypatch.setenv("VLLM_QUANTIZATION", "awq")
    monkeypatch.setenv("VLLM_KV_OFFLOAD_GIB", "64")
    monkeypatch.setenv(
        "VLLM_SPECULATIVE_CONFIG", '{"method": "ngram", "num_speculative_tokens": 4}'
    )
    args = scale_engine_args(ScaleOptions.from_env(), cpu_build=False, quantization_methods=METHODS)
    assert args == {
        "tensor_parallel_size": 4,
        "gpu_memory_utilization": 0.85,
        "quantization": "awq",
        "kv_offloading_size": 64.0,
        "speculative_config": {"method": "ngram", "num_speculative_tokens": 4},
    }


def test_unset_knobs_leave_vllm_at_its_defaults() -> None:
    assert scale_engine_args(ScaleOptions(), cpu_build=True, quantization_methods=METHODS) == {}


@pytest.mark.parametrize(
    ("options", "named", "instead"),
    [
        (ScaleOptions(speculative={"method": "ngram"}), "VLLM_SPECULATIVE_CONFIG", "GPU build"),
        (
            ScaleOptions(gpu_memory_utilization=0.9),
            "VLLM_GPU_MEMORY_UTILIZATION",
            "VLLM_CPU_KVCACHE_SPACE",
        ),
        (ScaleOptions(kv_offload_gib=8.0), "VLLM_KV_OFFLOAD_GIB", "VLLM_CPU_KVCACHE_SPACE"),
        (ScaleOptions(quantization="4bit-magic"), "VLLM_QUANTIZATION", "awq"),
    ],
)
def test_what_the_cpu_build_cannot_do_is_refused_with_the_setting_named(
    options: ScaleOptions, named: str, instead: str
) -> None:
    with pytest.raises(EngineError) as refused:
        scale_engine_args(options, cpu_build=True, quantization_methods=METHODS)
    assert named in str(refused.value)
    assert instead in str(refused.value)


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("VLLM_SPECULATIVE_CONFIG", "ngram please", "must be a JSON object"),
        ("VLLM_SPECULATIVE_CONFIG", "[1, 2]", "must be a JSON object"),
        ("VLLM_TENSOR_PARALLEL_SIZE", "0", "at least 1"),
        ("VLLM_TENSOR_PARALLEL_SIZE", "two", "must be an integer"),
        ("VLLM_GPU_MEMORY_UTILIZATION", "1.5", "(0, 1]"),
    ],
)
def test_a_malformed_knob_names_itself(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, says: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name) as bad:
        ScaleOptions.from_env()
    assert says in str(bad.value)


def test_the_installed_cpu_build_knows_its_quantization_methods() -> None:
    assert vllm_scale_engine_args(ScaleOptions(quantization="fp8")) == {"quantization": "fp8"}
    with pytest.raises(EngineError, match="VLLM_SPECULATIVE_CONFIG"):
        vllm_scale_engine_args(ScaleOptions(speculative={"method": "ngram"}))


def test_the_worker_refuses_speculative_decoding_on_cpu_at_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m inference` exits 1 with the reason, and no model is loaded."""
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/10")
    monkeypatch.setenv("INFERENCE_METRICS_PORT", "0")
    monkeypatch.setenv("INFERENCE_ENGINE", "vllm")
    monkeypatch.setenv("VLLM_SPECULATIVE_CONFIG", '{"method": "ngram"}')
    assert main([]) == 1
    err = capsys.readouterr().err
    assert "VLLM_SPECULATIVE_CONFIG" in err
    assert "no speculative decoding" in err
