"""Worker and engine settings, declared once with their types, defaults and bounds (no Django).

Each is a pydantic-settings object, like the web's (`chatapp/settings/service.py`): read from
the environment by `from_env()`, where a value that is not a number, or out of its bounds, is a
ValueError naming the variable and saying what it must be, so a worker with a typo stops at
start instead of failing later mid-answer. Constructed directly (tests, benchmarks) the keyword
arguments win over the environment. `docs/configuration.md` is generated from these
declarations (`chatapp/settings/docs.py`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Annotated, Literal, Self
from urllib.parse import urlsplit

from pydantic import BeforeValidator, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from inference.engines.dtype import DtypeSetting, parse_dtype_setting
from inference.wire.protocol import BACKGROUND_CHANNEL, REQUEST_CHANNEL

REPO_ROOT = Path(__file__).resolve().parent.parent

EngineKind = Literal["vllm", "scripted", "openai"]

# The folder `python -m modelprep prepare` gives the default model (SmolLM2 Instruct).
DEFAULT_MODEL_DIR_NAME = "smollm2-135m-instruct"


def data_dir_from_env() -> Path:
    return Path(os.environ.get("CHAT_DATA_DIR") or REPO_ROOT / "data").resolve()


def _faq_verifier_dir_default() -> Path:
    """<data_dir>/models/faq-verifier: where `prepare --model faq-verifier` puts it."""
    return data_dir_from_env() / "models" / "faq-verifier"


# What a failed check says, by pydantic's error type: the words the rest of our errors use.
_SAYS = {
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_parsing": "must be a number",
    "bool_parsing": "must be true or false",
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be greater than {gt}",
    "less_than_equal": "must be at most {le}",
    "literal_error": "must be one of {expected}",
}


class _EnvSettings(BaseSettings):
    model_config = SettingsConfigDict(
        frozen=True, extra="ignore", env_ignore_empty=True, populate_by_name=True
    )

    @classmethod
    def from_env(cls) -> Self:
        """Read from the environment; ValueError naming each bad variable."""
        try:
            return cls()
        except ValidationError as exc:
            raise ValueError(_described(cls, exc)) from None


def env_name(model: type[BaseSettings], field: str) -> str:
    """The environment variable a settings field is read from: its alias, else the model's
    prefix and the field's name."""
    alias = model.model_fields[field].validation_alias
    if isinstance(alias, str):
        return alias
    return f"{model.model_config.get('env_prefix', '')}{field}".upper()


def _described(model: type[_EnvSettings], exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else ""
        name = env_name(model, field) if field in model.model_fields else model.__name__
        if error["type"] == "value_error":  # our own check: its message names the variable
            problems.append(str(error["ctx"]["error"]))
            continue
        ctx = error.get("ctx", {})
        if error["type"] == "greater_than" and ctx.get("gt") == 0:
            says = "must be positive"
        else:
            says = _SAYS.get(error["type"], error["msg"]).format(**ctx)
        problems.append(f"{name} {says}, got {error.get('input')!r}")
    return "; ".join(problems)


def _zero_is_none(value: object) -> object:
    return None if value in (0, "0", "0.0") else value


def _blank_is_none(value: object) -> object:
    return (value.strip() or None) if isinstance(value, str) else value


ZeroIsUnset = BeforeValidator(_zero_is_none)  # 0: not set (vLLM's own default)
BlankIsUnset = BeforeValidator(_blank_is_none)  # blank: not set


def _resolved(value: Path | None) -> Path | None:
    return None if value is None else value.expanduser().resolve()


class ScaleOptions(_EnvSettings):
    """Big-model knobs passed to vLLM; checked against the engine build before the model
    loads (`inference/engines/vllm_options.py`). Unset: vLLM's defaults."""

    model_config = SettingsConfigDict(env_prefix="VLLM_")

    tensor_parallel_size: int = Field(1, ge=1)  # GPUs one model is split over
    # share of each GPU's memory, (0, 1]
    gpu_memory_utilization: Annotated[float | None, ZeroIsUnset] = None
    quantization: Annotated[str | None, BlankIsUnset] = None  # awq, gptq, fp8, ...
    # KV cache spill to CPU memory
    kv_offload_gib: Annotated[float | None, ZeroIsUnset] = Field(None, gt=0)
    # vLLM's speculative_config as JSON, e.g.
    # {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}
    speculative: Annotated[dict[str, object] | None, NoDecode] = Field(
        None, validation_alias="VLLM_SPECULATIVE_CONFIG"
    )

    @field_validator("gpu_memory_utilization")
    @classmethod
    def _a_share(cls, share: float | None) -> float | None:
        if share is not None and not 0 < share <= 1:
            raise ValueError(f"VLLM_GPU_MEMORY_UTILIZATION must be in (0, 1], got {share:g}")
        return share

    @field_validator("speculative", mode="before")
    @classmethod
    def _json_object(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        if not value.strip():
            return None
        try:
            parsed = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"VLLM_SPECULATIVE_CONFIG must be a JSON object: {exc}") from None
        if not isinstance(parsed, dict):
            raise ValueError("VLLM_SPECULATIVE_CONFIG must be a JSON object")
        return parsed


class EngineSettings(_EnvSettings):
    model_config = SettingsConfigDict(env_prefix="VLLM_")

    # CHAT_DATA_DIR: models, caches, the SQLite database
    data_dir: Path = Field(
        default_factory=lambda: REPO_ROOT / "data", validation_alias="CHAT_DATA_DIR"
    )
    # MODEL: the model folder; unset: the packaged instruct model (`prepare`)
    model_dir: Path = Field(
        default_factory=lambda data: data["data_dir"] / "models" / DEFAULT_MODEL_DIR_NAME,
        validation_alias="MODEL",
    )
    max_num_seqs: int = Field(16, ge=1)
    max_num_batched_tokens: int = Field(4096, ge=1)
    max_model_len: int = Field(4096, ge=1)
    kv_cache_gib: float = Field(2.0, gt=0, validation_alias="VLLM_CPU_KVCACHE_SPACE")
    enforce_eager: bool = True
    # vLLM's automatic prefix caching; off only to measure what it buys (bench/load.py)
    prefix_caching: bool = True
    # KV cache block size in tokens (unset or 0: vLLM's default, 128 on the CPU build); prefix
    # caching reuses whole blocks only
    block_size: Annotated[int | None, ZeroIsUnset] = Field(None, ge=1)
    # a Jinja chat template that replaces the model's own (CHAT_TEMPLATE; docs/operations.md)
    chat_template_path: Annotated[Path | None, BlankIsUnset] = Field(
        None, validation_alias="CHAT_TEMPLATE"
    )
    scale: ScaleOptions = Field(default_factory=ScaleOptions.from_env)
    # auto (bfloat16 where the CPU or GPU has native bf16, float32 on other CPUs, float16 on
    # other GPUs; inference/engines/dtype.py), bfloat16, float16 or float32
    dtype: DtypeSetting = "auto"

    @field_validator("data_dir", "model_dir", "chat_template_path")
    @classmethod
    def _absolute(cls, path: Path | None) -> Path | None:
        return _resolved(path)

    @field_validator("dtype", mode="before")
    @classmethod
    def _dtype(cls, value: object) -> object:
        return parse_dtype_setting(value) if isinstance(value, str) else value

    def chat_template(self) -> str | None:
        """The override's text (OSError when unreadable); None: the model's own template."""
        if self.chat_template_path is None:
            return None
        return self.chat_template_path.read_text(encoding="utf-8")

    @classmethod
    def for_model(cls, default_model_dir: Path | None) -> EngineSettings:
        """From the environment, with `default_model_dir` where MODEL is unset."""
        settings = cls.from_env()
        if default_model_dir is None or os.environ.get("MODEL"):
            return settings
        return settings.model_copy(update={"model_dir": default_model_dir})


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


class OpenAIEngineSettings(_EnvSettings):
    """The OpenAI-compatible server the `openai` engine streams from (docs/operations.md)."""

    model_config = SettingsConfigDict(env_prefix="OPENAI_ENGINE_")

    url: str = ""  # base URL, e.g. http://router:8000
    model: Annotated[str | None, BlankIsUnset] = None  # None: the only one /v1/models lists
    api_key: Annotated[str | None, BlankIsUnset] = None  # sent as a bearer token
    # carries the conversation id, for affinity routing
    session_header: str = DEFAULT_SESSION_HEADER
    # connect, and the longest wait for the next bytes of a stream (a queued request or a long
    # prefill sends none)
    timeout_s: float = Field(120.0, gt=0)

    @field_validator("url")
    @classmethod
    def _base_url(cls, url: str) -> str:
        if not url.strip():
            raise ValueError(
                "INFERENCE_ENGINE=openai needs OPENAI_ENGINE_URL, the base URL of the "
                "OpenAI-compatible server (e.g. http://router:8000)"
            )
        return openai_base_url(url)

    @field_validator("session_header")
    @classmethod
    def _header_name(cls, header: str) -> str:
        header = header.strip()
        if not _HEADER_NAME.match(header):
            raise ValueError(f"OPENAI_ENGINE_SESSION_HEADER is not a header name: {header!r}")
        return header


class WorkerSettings(_EnvSettings):
    model_config = SettingsConfigDict(env_prefix="INFERENCE_")

    engine: EngineKind = "vllm"
    request_channel: str = REQUEST_CHANNEL
    max_active: int = Field(16, ge=1)
    # a delta is sent when this much time passed, or this many tokens (the first goes at once)
    coalesce_ms: float = Field(15.0, ge=0)
    coalesce_tokens: int = Field(8, ge=1)
    # REDIS_URL: unset, the worker runs inside the web process, on that process's own Redis
    redis_url: str = Field("", validation_alias="REDIS_URL")
    faq: bool = True
    # the learned verifier that decides whether a cached FAQ answer is right for a question
    faq_verifier_dir: Path = Field(default_factory=_faq_verifier_dir_default)
    # a verifier that is missing or stale is trained in the background (niced) while the FAQ
    # cache answers exact repeats only; off: wait for one prepared elsewhere (polled)
    faq_verifier_train: bool = True
    # how often a worker waiting for its verifier looks for the prepared folder
    faq_verifier_poll_s: float = Field(15.0, gt=0)
    heartbeat_s: float = Field(2.0, gt=0)
    background_channel: str = BACKGROUND_CHANNEL
    # at most this many background requests run at once (out of max_active)
    max_background: int = Field(2, ge=1)
    # requests that may wait for this worker beyond max_active: admission refuses past
    # (max_active + max_queue) summed over live workers
    max_queue: int = Field(16, ge=0)
    # a standalone worker serves Prometheus metrics here (0: off); docs/metrics.md
    metrics_port: int = Field(9400, ge=0, le=65535)
    metrics_host: str = "127.0.0.1"
    # touched on every successful heartbeat once the model is loaded ("" = off): the
    # container healthcheck (`python -m inference.healthcheck`) reads its age
    health_file: str = ""
    # a running request that made no new token for this long after its first one is aborted
    # with an engine error (0: off); the prefill before the first token is not bounded here
    stall_s: float = Field(30.0, ge=0)
    # how often the engine's own health check runs (0: off), and how long it may take
    health_every_s: float = Field(10.0, ge=0)
    health_timeout_s: float = Field(5.0, gt=0)
    # a remote engine (`INFERENCE_ENGINE=openai`) must fail this many health checks in a row
    # before the worker stops (a router restart is a blip); a dead in-process engine stops it
    # at once
    health_failures: int = Field(3, ge=1)
    # a request taken by a worker that never accepted it (killed between the two) is taken
    # by another worker after this long
    reclaim_after_s: float = Field(10.0, gt=0)
    # on SIGTERM, running answers get this long to finish before they are handed on
    drain_s: float = Field(30.0, ge=0)
    # at start, before taking chat: warm the published templates' prefixes for up to this
    # long (0: off); a web process must answer within start_warmup_ask_s
    start_warmup_s: float = Field(60.0, ge=0)
    start_warmup_ask_s: float = Field(3.0, gt=0)

    @field_validator("faq_verifier_dir")
    @classmethod
    def _absolute(cls, path: Path) -> Path:
        return path.expanduser().resolve()
