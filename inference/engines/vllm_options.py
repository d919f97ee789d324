"""The big-model knobs (tensor parallel, GPU memory share, quantization, KV-cache CPU offload,
speculative decoding) as vLLM engine arguments, refused at start when this build cannot do
them, with the setting named and what to do instead: a worker must not load for minutes and
then fail, or silently ignore a setting the operator relies on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inference.engines.base import EngineError
from inference.settings import ScaleOptions


def scale_engine_args(
    options: ScaleOptions, *, cpu_build: bool, quantization_methods: Sequence[str]
) -> dict[str, Any]:
    """`AsyncEngineArgs` keywords for `options`; EngineError for what this build cannot do."""
    refused = []
    if cpu_build and options.speculative is not None:
        refused.append(
            "VLLM_SPECULATIVE_CONFIG: vLLM's CPU build has no speculative decoding (its CPU "
            "model runner refuses it); unset it, or run the worker on a GPU build"
        )
    if cpu_build and options.gpu_memory_utilization is not None:
        refused.append(
            "VLLM_GPU_MEMORY_UTILIZATION: there is no GPU memory on the CPU build; size the "
            "KV cache with VLLM_CPU_KVCACHE_SPACE (GiB) instead"
        )
    if cpu_build and options.kv_offload_gib is not None:
        refused.append(
            "VLLM_KV_OFFLOAD_GIB: the CPU build keeps the whole KV cache in CPU memory "
            "already; grow VLLM_CPU_KVCACHE_SPACE instead"
        )
    if options.quantization is not None and options.quantization not in quantization_methods:
        refused.append(
            f"VLLM_QUANTIZATION={options.quantization!r} is not a method this vLLM knows "
            f"(it knows: {', '.join(sorted(quantization_methods))})"
        )
    if refused:
        raise EngineError("cannot start the engine with these settings: " + "; ".join(refused))
    args: dict[str, Any] = {}
    if options.tensor_parallel_size != 1:
        args["tensor_parallel_size"] = options.tensor_parallel_size
    if options.gpu_memory_utilization is not None:
        args["gpu_memory_utilization"] = options.gpu_memory_utilization
    if options.quantization is not None:
        args["quantization"] = options.quantization
    if options.kv_offload_gib is not None:
        args["kv_offloading_size"] = options.kv_offload_gib
    if options.speculative is not None:
        args["speculative_config"] = dict(options.speculative)
    return args


def vllm_scale_engine_args(options: ScaleOptions) -> dict[str, Any]:
    """`scale_engine_args` for the installed vLLM build (imports vLLM)."""
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    from vllm.platforms import current_platform

    return scale_engine_args(
        options,
        cpu_build=current_platform.is_cpu(),
        quantization_methods=list(QUANTIZATION_METHODS),
    )
