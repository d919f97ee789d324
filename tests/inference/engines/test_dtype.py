"""The engine's dtype comes from the hardware: bf16 only where it is native (else it is
emulated, several times slower: TTFT 674 ms in bf16 against 183 ms in float32 on an AVX2-only
EPYC), float32 on other CPUs, float16 on GPUs without bf16; VLLM_DTYPE overrides, checked."""

from __future__ import annotations

import pytest

from inference.__main__ import main
from inference.engines.dtype import (
    DeviceFacts,
    choose_dtype,
    cpu_facts,
    device_facts,
    parse_dtype_setting,
)
from inference.settings import EngineSettings

# /proc/cpuinfo of the machine (AVX2, no AVX-512) and of this dev machine (Zen 4
# with AVX512-BF16), abridged to the lines that matter; an Arm Neoverse V1 with bf16
AVX2_EPYC = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B12
flags\t\t: fpu vme sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi1 bmi2 sha_ni

processor\t: 1
model name\t: AMD EPYC 7B12
flags\t\t: fpu vme sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi1 bmi2 sha_ni
"""
ZEN4_EPYC = """processor\t: 0
model name\t: AMD EPYC
flags\t\t: fpu sse sse2 avx f16c avx2 avx512f avx512bw avx512vl avx512_bf16 avx512_vnni
"""
SAPPHIRE_RAPIDS = """model name\t: Intel(R) Xeon(R) Platinum 8481C
flags\t\t: avx2 avx512f avx512bw avx512_vnni amx_bf16 amx_tile amx_int8
"""
NEOVERSE_V1 = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp sve bf16 i8mm
CPU implementer\t: 0x41
"""


def test_a_cpu_without_native_bf16_runs_float32_and_says_why() -> None:
    choice = choose_dtype("auto", cpu_facts(AVX2_EPYC))
    assert choice.dtype == "float32"
    assert choice.describe().startswith("dtype float32: this CPU (AMD EPYC 7B12) has no native")
    assert "no avx512_bf16/amx_bf16 flag" in choice.reason


@pytest.mark.parametrize(
    ("cpuinfo", "flag"),
    [(ZEN4_EPYC, "avx512_bf16"), (SAPPHIRE_RAPIDS, "amx_bf16"), (NEOVERSE_V1, "bf16")],
)
def test_a_cpu_with_native_bf16_runs_bfloat16(cpuinfo: str, flag: str) -> None:
    choice = choose_dtype("auto", cpu_facts(cpuinfo))
    assert choice.dtype == "bfloat16"
    assert f"has native bf16 ({flag}" in choice.reason


def test_unreadable_cpuinfo_means_float32_never_emulated_bf16() -> None:
    assert choose_dtype("auto", cpu_facts("")).dtype == "float32"


@pytest.mark.parametrize(
    ("bf16", "dtype"),
    [(True, "bfloat16"), (False, "float16")],
)
def test_a_gpu_runs_bf16_where_it_has_it_else_float16(bf16: bool, dtype: str) -> None:
    facts = DeviceFacts(kind="gpu", name="Tesla T4" if not bf16 else "H200", gpu_bf16=bf16)
    choice = choose_dtype("auto", facts)
    assert choice.dtype == dtype
    assert facts.name in choice.reason


def test_an_unknown_device_leaves_the_choice_to_vllm() -> None:
    assert choose_dtype("auto", DeviceFacts(kind="other", name="tpu")).dtype == "auto"


@pytest.mark.parametrize("setting", ["bfloat16", "float16", "float32"])
def test_vllm_dtype_overrides_the_hardware_choice(setting: str) -> None:
    for facts in (cpu_facts(AVX2_EPYC), cpu_facts(ZEN4_EPYC), DeviceFacts(kind="gpu")):
        choice = choose_dtype(parse_dtype_setting(setting), facts)
        assert choice.dtype == setting
        assert f"VLLM_DTYPE={setting}" in choice.reason


def test_forcing_bf16_on_a_cpu_without_it_warns_in_the_log_line() -> None:
    choice = choose_dtype("bfloat16", cpu_facts(AVX2_EPYC))
    assert choice.dtype == "bfloat16"
    assert "emulated" in choice.reason
    assert "emulated" not in choose_dtype("bfloat16", cpu_facts(ZEN4_EPYC)).reason


@pytest.mark.parametrize(
    ("raw", "setting"),
    [("", "auto"), ("auto", "auto"), (" Float32 ", "float32"), ("BFLOAT16", "bfloat16")],
)
def test_vllm_dtype_is_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, raw: str, setting: str
) -> None:
    monkeypatch.setenv("VLLM_DTYPE", raw)
    assert EngineSettings.from_env().dtype == setting


@pytest.mark.parametrize("raw", ["fp32", "bf16", "int8", "half"])
def test_a_bad_vllm_dtype_names_the_setting_and_the_choices(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("VLLM_DTYPE", raw)
    with pytest.raises(ValueError, match="VLLM_DTYPE") as bad:
        EngineSettings.from_env()
    assert "auto, bfloat16, float16, float32" in str(bad.value)
    assert repr(raw) in str(bad.value)


def test_the_worker_refuses_a_bad_vllm_dtype_before_loading(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/10")
    monkeypatch.setenv("INFERENCE_METRICS_PORT", "0")
    monkeypatch.setenv("INFERENCE_ENGINE", "vllm")
    monkeypatch.setenv("VLLM_DTYPE", "fp8")
    assert main([]) == 1
    assert "VLLM_DTYPE must be one of" in capsys.readouterr().err


def test_this_machine_is_judged_from_its_own_cpuinfo() -> None:
    """The I/O edge on the machine running the tests: a CPU build reads /proc/cpuinfo."""
    pytest.importorskip("vllm")
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        pytest.skip("a GPU build: judged by torch.cuda, not /proc/cpuinfo")
    with open("/proc/cpuinfo", encoding="utf-8") as handle:
        text = handle.read()
    facts = device_facts()
    assert facts == cpu_facts(text)
    native = any(flag in facts.cpu_flags for flag in ("avx512_bf16", "amx_bf16"))
    assert choose_dtype("auto", facts).dtype == ("bfloat16" if native else "float32")
