"""The engine's dtype, chosen from the hardware it runs on (VLLM_DTYPE overrides).

bf16 is only fast where the hardware multiplies it natively. A CPU without AVX512-BF16 or AMX
emulates every bf16 matrix product: measured on an AVX2-only AMD EPYC (2 cores, SmolLM2 135M,
vLLM's own server, 320 of 343 prompt tokens cached) TTFT P50 674 ms in bf16 against 183 ms in
float32; `torch.nn.functional.linear` ran at 8.3 GFLOP/s in bf16 against 60 in fp32. So:

* a CPU with native bf16 (`avx512_bf16` or `amx_bf16` in /proc/cpuinfo's flags on x86,
  `bf16` in the Features of an Arm CPU): bfloat16;
* any other CPU: float32 (twice the weight memory: 540 MB instead of 270 for SmolLM2 135M);
* a GPU that supports bf16 (`torch.cuda.is_bf16_supported()`): bfloat16; one that does not
  (before Ampere): float16.

`choose_dtype` is the decision (facts in, dtype and the reason out); `device_facts` reads the
facts (vLLM's platform, /proc/cpuinfo, torch.cuda) and is the only part that does I/O.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

# what VLLM_DTYPE may say; "auto" (the default) is the choice from the hardware below
DtypeSetting = Literal["auto", "bfloat16", "float16", "float32"]
DTYPE_SETTINGS: tuple[DtypeSetting, ...] = ("auto", "bfloat16", "float16", "float32")
# what vLLM is asked for: a dtype, or "auto" (vLLM's own rule: the model's dtype) on a device
# this module knows nothing about
EngineDtype = Literal["auto", "bfloat16", "float16", "float32"]

# /proc/cpuinfo flags that mean bf16 matrix products run natively: x86 (AVX512-BF16, AMX) and
# Arm (the `bf16` feature, BFDOT/BFMMLA)
CPU_BF16_FLAGS: tuple[str, ...] = ("avx512_bf16", "amx_bf16", "bf16")


def parse_dtype_setting(raw: str) -> DtypeSetting:
    """VLLM_DTYPE checked: one of auto, bfloat16, float16, float32 (case and blanks ignored)."""
    value = raw.strip().lower() or "auto"
    for setting in DTYPE_SETTINGS:
        if value == setting:
            return setting
    raise ValueError(
        f"VLLM_DTYPE must be one of {', '.join(DTYPE_SETTINGS)} (auto: bfloat16 where the "
        f"CPU or GPU has native bf16, else float32 on CPU, float16 on GPU), got {raw!r}"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceFacts:
    """What the dtype depends on. `kind` "other": a device this module cannot judge."""

    kind: Literal["cpu", "gpu", "other"]
    name: str = ""  # CPU model name or GPU name, for the log
    cpu_flags: frozenset[str] = field(default_factory=frozenset)  # kind "cpu"
    gpu_bf16: bool = False  # kind "gpu": torch.cuda.is_bf16_supported()


@dataclass(frozen=True, slots=True)
class DtypeChoice:
    dtype: EngineDtype
    reason: str

    def describe(self) -> str:
        """The start-up log line: `dtype float32: this CPU has no native bf16 (...)`."""
        return f"dtype {self.dtype}: {self.reason}"


def _cpu_bf16_flags(flags: frozenset[str]) -> list[str]:
    return [flag for flag in CPU_BF16_FLAGS if flag in flags]


def choose_dtype(setting: DtypeSetting, facts: DeviceFacts) -> DtypeChoice:
    """The dtype to run the model in, and why (for the start-up log)."""
    on = f" ({facts.name})" if facts.name else ""
    if setting != "auto":
        reason = f"set by VLLM_DTYPE={setting}"
        if facts.kind == "cpu" and setting == "bfloat16" and not _cpu_bf16_flags(facts.cpu_flags):
            reason += (
                f"; this CPU{on} has no native bf16 (no avx512_bf16/amx_bf16 flag), so every "
                "matrix product is emulated: expect float32 to be several times faster"
            )
        elif facts.kind == "cpu" and setting == "float16":
            reason += "; CPUs seldom multiply float16 natively: float32 or bfloat16 is safer"
        elif facts.kind == "gpu" and setting == "bfloat16" and not facts.gpu_bf16:
            reason += f"; this GPU{on} reports no bf16 support: vLLM may refuse to start"
        return DtypeChoice(setting, reason)
    if facts.kind == "cpu":
        found = _cpu_bf16_flags(facts.cpu_flags)
        if found:
            return DtypeChoice("bfloat16", f"this CPU{on} has native bf16 ({', '.join(found)})")
        return DtypeChoice(
            "float32",
            f"this CPU{on} has no native bf16 (no avx512_bf16/amx_bf16 flag): bf16 would be "
            "emulated, several times slower than float32",
        )
    if facts.kind == "gpu":
        if facts.gpu_bf16:
            return DtypeChoice("bfloat16", f"this GPU{on} supports bf16")
        return DtypeChoice("float16", f"this GPU{on} has no bf16: float16, its half precision")
    return DtypeChoice("auto", f"no CPU or CUDA facts for this device{on}: vLLM's own choice")


def cpu_facts(cpuinfo: str) -> DeviceFacts:
    """A CPU's facts from the text of /proc/cpuinfo: the first `flags` (x86) or `Features`
    (Arm) line, and the first `model name`."""
    flags: frozenset[str] | None = None
    name = ""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        if key in ("flags", "features") and flags is None:
            flags = frozenset(value.split())
        elif key == "model name" and not name:
            name = value.strip()
    return DeviceFacts(kind="cpu", name=name, cpu_flags=flags or frozenset())


def device_facts() -> DeviceFacts:
    """The facts of the device vLLM will run on (imports vLLM and torch; reads /proc/cpuinfo)."""
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        text = ""
        with contextlib.suppress(OSError):
            text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        return cpu_facts(text)
    import torch

    if torch.cuda.is_available():
        return DeviceFacts(
            kind="gpu",
            name=str(torch.cuda.get_device_name(0)),
            gpu_bf16=bool(torch.cuda.is_bf16_supported()),
        )
    return DeviceFacts(kind="other", name=str(current_platform.device_name))


def engine_dtype(setting: DtypeSetting) -> DtypeChoice:
    """`choose_dtype` for this machine."""
    return choose_dtype(setting, device_facts())
