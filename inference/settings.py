"""Worker and engine settings, read from the environment (no Django here)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from inference.engines.dtype import DtypeSetting, parse_dtype_setting
from inference.wire.protocol import BACKGROUND_CHANNEL, REQUEST_CHANNEL

REPO_ROOT = Path(__file__).resolve().parent.parent

EngineKind = Literal["vllm", "scripted", "openai"]


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from exc


def _env_port(name: str, default: int) -> int:
    port = _env_int(name, default)
    if not 0 <= port <= 65535:
        raise ValueError(f"{name} must be a TCP port (1-65535) or 0 for off, got {port}")
    return port


def _env_at_least_one(name: str, default: int) -> int:
    value = _env_int(name, default)
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return value


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ValueError(f"{name} must be a number, got {raw!r}") from exc


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"{name} must be true or false, got {raw!r}")


# The folder `python -m inference.models prepare` gives the default model (SmolLM2 Instruct).
DEFAULT_MODEL_DIR_NAME = "smollm2-135m-instruct"


def _faq_verifier_dir_from_env() -> Path:
    """INFERENCE_FAQ_VERIFIER_DIR, else <data_dir>/models/faq-verifier (where prepare puts it)."""
    raw = os.environ.get("INFERENCE_FAQ_VERIFIER_DIR", "").strip()
    if raw:
        return Path(raw).expanduser().resolve()
    return data_dir_from_env() / "models" / "faq-verifier"


def data_dir_from_env() -> Path:
    return Path(os.environ.get("CHAT_DATA_DIR") or REPO_ROOT / "data").resolve()


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleOptions:
    """Big-model knobs passed to vLLM; checked against the engine build before the model
    loads (`inference/engines/vllm_options.py`). Unset: vLLM's defaults."""

    tensor_parallel_size: int = 1  # VLLM_TENSOR_PARALLEL_SIZE: GPUs one model is split over
    gpu_memory_utilization: float | None = None  # VLLM_GPU_MEMORY_UTILIZATION: share, (0, 1]
    quantization: str | None = None  # VLLM_QUANTIZATION: awq, gptq, fp8, ...
    kv_offload_gib: float | None = None  # VLLM_KV_OFFLOAD_GIB: KV cache spill to CPU memory
    # VLLM_SPECULATIVE_CONFIG: vLLM's speculative_config as JSON, e.g.
    # {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}
    speculative: dict[str, object] | None = None

    @classmethod
    def from_env(cls) -> ScaleOptions:
        raw_spec = os.environ.get("VLLM_SPECULATIVE_CONFIG", "").strip()
        speculative: dict[str, object] | None = None
        if raw_spec:
            try:
                parsed = json.loads(raw_spec)
            except ValueError as exc:
                raise ValueError(f"VLLM_SPECULATIVE_CONFIG must be a JSON object: {exc}") from exc
            if not isinstance(parsed, dict):
                raise ValueError("VLLM_SPECULATIVE_CONFIG must be a JSON object")
            speculative = parsed
        tensor_parallel = _env_int("VLLM_TENSOR_PARALLEL_SIZE", 1)
        if tensor_parallel < 1:
            raise ValueError(f"VLLM_TENSOR_PARALLEL_SIZE must be at least 1, got {tensor_parallel}")
        share = _env_float("VLLM_GPU_MEMORY_UTILIZATION", 0.0) or None
        if share is not None and not 0 < share <= 1:
            raise ValueError(f"VLLM_GPU_MEMORY_UTILIZATION must be in (0, 1], got {share:g}")
        offload = _env_float("VLLM_KV_OFFLOAD_GIB", 0.0) or None
        if offload is not None and offload < 0:
            raise ValueError(f"VLLM_KV_OFFLOAD_GIB must be positive, got {offload:g}")
        return cls(
            tensor_parallel_size=tensor_parallel,
            gpu_memory_utilization=share,
            quantization=os.environ.get("VLLM_QUANTIZATION", "").strip() or None,
            kv_offload_gib=offload,
            speculative=speculative,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineSettings:
    model_dir: Path
    data_dir: Path
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    kv_cache_gib: float
    enforce_eager: bool
    # vLLM's automatic prefix caching; off only to measure what it buys (bench/load.py)
    prefix_caching: bool = True
    # KV cache block size in tokens (None: vLLM's default, 128 on the CPU build); prefix
    # caching reuses whole blocks only
    block_size: int | None = None
    # a Jinja chat template that replaces the model's own (CHAT_TEMPLATE; docs/operations.md)
    chat_template_path: Path | None = None
    scale: ScaleOptions = ScaleOptions()
    # VLLM_DTYPE: auto (bfloat16 where the CPU or GPU has native bf16, float32 on other CPUs,
    # float16 on other GPUs; inference/engines/dtype.py), bfloat16, float16 or float32
    dtype: DtypeSetting = "auto"

    def chat_template(self) -> str | None:
        """The override's text (OSError when unreadable); None: the model's own template."""
        if self.chat_template_path is None:
            return None
        return self.chat_template_path.read_text(encoding="utf-8")

    @classmethod
    def from_env(cls, *, default_model_dir: Path | None = None) -> EngineSettings:
        data_dir = data_dir_from_env()
        model = os.environ.get("MODEL")
        if model:
            model_dir = Path(model).expanduser().resolve()
        elif default_model_dir is not None:
            model_dir = default_model_dir
        else:  # the packaged instruct model (`python -m inference.models prepare`)
            model_dir = data_dir / "models" / DEFAULT_MODEL_DIR_NAME
        template = os.environ.get("CHAT_TEMPLATE", "").strip()
        return cls(
            model_dir=model_dir,
            data_dir=data_dir,
            max_num_seqs=_env_int("VLLM_MAX_NUM_SEQS", 16),
            max_num_batched_tokens=_env_int("VLLM_MAX_NUM_BATCHED_TOKENS", 4096),
            max_model_len=_env_int("VLLM_MAX_MODEL_LEN", 4096),
            kv_cache_gib=_env_float("VLLM_CPU_KVCACHE_SPACE", 2.0),
            enforce_eager=_env_bool("VLLM_ENFORCE_EAGER", True),
            prefix_caching=_env_bool("VLLM_PREFIX_CACHING", True),
            block_size=_env_int("VLLM_BLOCK_SIZE", 0) or None,
            chat_template_path=Path(template).expanduser().resolve() if template else None,
            scale=ScaleOptions.from_env(),
            dtype=parse_dtype_setting(os.environ.get("VLLM_DTYPE", "")),
        )


# The header vLLM's router / production-stack routes sessions by (vLLM's server reads it too).
DEFAULT_SESSION_HEADER = "X-Session-ID"
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")  # an HTTP header name (RFC 9110)


def openai_base_url(raw: str) -> str:
    """OPENAI_ENGINE_URL checked and normalised: scheme and host, no trailing slash, and
    without a final `/v1` (the OpenAI SDKs' habit; /health lives beside /v1)."""
    parts = urlsplit(raw.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"OPENAI_ENGINE_URL must be the server's base URL, like http://router:8000, got {raw!r}"
        )
    if parts.query or parts.fragment:
        raise ValueError(f"OPENAI_ENGINE_URL must not have a query or fragment, got {raw!r}")
    try:
        _ = parts.port  # raises on a port that is not a number
    except ValueError as exc:
        raise ValueError(f"OPENAI_ENGINE_URL has a bad port: {raw!r}") from exc
    path = parts.path.rstrip("/").removesuffix("/v1").rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{path}"


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAIEngineSettings:
    """The OpenAI-compatible server the `openai` engine streams from (docs/operations.md)."""

    url: str  # OPENAI_ENGINE_URL: base URL, e.g. http://router:8000
    model: str | None = None  # OPENAI_ENGINE_MODEL; None: the only one /v1/models lists
    api_key: str | None = None  # OPENAI_ENGINE_API_KEY, sent as a bearer token
    # OPENAI_ENGINE_SESSION_HEADER: carries the conversation id, for affinity routing
    session_header: str = DEFAULT_SESSION_HEADER
    # OPENAI_ENGINE_TIMEOUT_S: connect, and the longest wait for the next bytes of a stream
    # (a queued request or a long prefill sends none)
    timeout_s: float = 120.0

    def __post_init__(self) -> None:  # checked and normalised however it was made
        object.__setattr__(self, "url", openai_base_url(self.url))
        if not _HEADER_NAME.match(self.session_header):
            raise ValueError(
                f"OPENAI_ENGINE_SESSION_HEADER is not a header name: {self.session_header!r}"
            )
        if self.timeout_s <= 0:
            raise ValueError(f"OPENAI_ENGINE_TIMEOUT_S must be positive, got {self.timeout_s:g}")

    @classmethod
    def from_env(cls) -> OpenAIEngineSettings:
        url = os.environ.get("OPENAI_ENGINE_URL", "").strip()
        if not url:
            raise ValueError(
                "INFERENCE_ENGINE=openai needs OPENAI_ENGINE_URL, the base URL of the "
                "OpenAI-compatible server (e.g. http://router:8000)"
            )
        return cls(
            url=url,
            model=os.environ.get("OPENAI_ENGINE_MODEL", "").strip() or None,
            api_key=os.environ.get("OPENAI_ENGINE_API_KEY", "").strip() or None,
            session_header=os.environ.get("OPENAI_ENGINE_SESSION_HEADER", "").strip()
            or DEFAULT_SESSION_HEADER,
            timeout_s=_env_float("OPENAI_ENGINE_TIMEOUT_S", 120.0),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSettings:
    engine: EngineKind
    request_channel: str
    max_active: int
    coalesce_ms: float
    coalesce_tokens: int
    redis_url: str
    faq: bool = False
    # the learned verifier that decides whether a cached FAQ answer is right for a question
    # (prepared at <data_dir>/models/faq-verifier)
    faq_verifier_dir: Path = field(default_factory=_faq_verifier_dir_from_env)
    # a verifier that is missing or stale is trained in the background (niced) while the FAQ
    # cache answers exact repeats only; off: wait for one prepared elsewhere (polled)
    faq_verifier_train: bool = True
    # how often a worker waiting for its verifier looks for the prepared folder
    faq_verifier_poll_s: float = 15.0
    heartbeat_s: float = 2.0
    background_channel: str = BACKGROUND_CHANNEL
    # at most this many background requests run at once (out of max_active)
    max_background: int = 2
    # requests that may wait for this worker beyond max_active: admission refuses past
    # (max_active + max_queue) summed over live workers
    max_queue: int = 16
    # a standalone worker serves Prometheus metrics here (0: off); docs/metrics.md
    metrics_port: int = 9400
    metrics_host: str = "127.0.0.1"
    # touched on every successful heartbeat once the model is loaded ("" = off): the
    # container healthcheck (`python -m inference.healthcheck`) reads its age
    health_file: str = ""
    # a running request that made no new token for this long after its first one is aborted
    # with an engine error (0: off); the prefill before the first token is not bounded here
    stall_s: float = 30.0
    # how often the engine's own health check runs (0: off), and how long it may take
    health_every_s: float = 10.0
    health_timeout_s: float = 5.0
    # a remote engine (`INFERENCE_ENGINE=openai`) must fail this many health checks in a row
    # before the worker stops (a router restart is a blip); a dead in-process engine stops it
    # at once
    health_failures: int = 3
    # a request taken by a worker that never accepted it (killed between the two) is taken
    # by another worker after this long
    reclaim_after_s: float = 10.0
    # on SIGTERM, running answers get this long to finish before they are aborted
    drain_s: float = 30.0
    # at start, before taking chat: warm the published templates' prefixes for up to this
    # long (0: off); a web process must answer within start_warmup_ask_s
    start_warmup_s: float = 60.0
    start_warmup_ask_s: float = 3.0

    @classmethod
    def from_env(cls) -> WorkerSettings:
        engine = os.environ.get("INFERENCE_ENGINE", "vllm")
        kinds: dict[str, EngineKind] = {"vllm": "vllm", "openai": "openai", "scripted": "scripted"}
        if engine not in kinds:
            raise ValueError(
                f"INFERENCE_ENGINE must be 'vllm', 'openai' or 'scripted', got {engine!r}"
            )
        return cls(
            engine=kinds[engine],
            request_channel=os.environ.get("INFERENCE_REQUEST_CHANNEL", REQUEST_CHANNEL),
            max_active=_env_int("INFERENCE_MAX_ACTIVE", 16),
            coalesce_ms=_env_float("INFERENCE_COALESCE_MS", 15.0),
            coalesce_tokens=_env_int("INFERENCE_COALESCE_TOKENS", 8),
            redis_url=os.environ.get("REDIS_URL", ""),
            faq=_env_bool("INFERENCE_FAQ", True),
            faq_verifier_train=_env_bool("INFERENCE_FAQ_VERIFIER_TRAIN", True),
            faq_verifier_poll_s=_env_float("INFERENCE_FAQ_VERIFIER_POLL_S", 15.0),
            heartbeat_s=_env_float("INFERENCE_HEARTBEAT_S", 2.0),
            background_channel=os.environ.get("INFERENCE_BACKGROUND_CHANNEL", BACKGROUND_CHANNEL),
            max_background=_env_int("INFERENCE_MAX_BACKGROUND", 2),
            max_queue=_env_int("INFERENCE_MAX_QUEUE", 16),
            metrics_port=_env_port("INFERENCE_METRICS_PORT", 9400),
            metrics_host=os.environ.get("INFERENCE_METRICS_HOST") or "127.0.0.1",
            health_file=os.environ.get("INFERENCE_HEALTH_FILE", ""),
            stall_s=_env_float("INFERENCE_STALL_S", 30.0),
            health_every_s=_env_float("INFERENCE_HEALTH_EVERY_S", 10.0),
            health_timeout_s=_env_float("INFERENCE_HEALTH_TIMEOUT_S", 5.0),
            health_failures=_env_at_least_one("INFERENCE_HEALTH_FAILURES", 3),
            reclaim_after_s=_env_float("INFERENCE_RECLAIM_AFTER_S", 10.0),
            drain_s=_env_float("INFERENCE_DRAIN_S", 30.0),
            start_warmup_s=_env_float("INFERENCE_START_WARMUP_S", 60.0),
        )
