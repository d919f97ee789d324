"""docs/configuration.md, generated: `python -m chatapp.settings.docs` (`make docs`).

One source of truth. The names and defaults come from the code: the web's `CHAT_*` and
`LOGIN_*` and the worker's `INFERENCE_*`, `VLLM_*` and `OPENAI_ENGINE_*` from their pydantic
declarations (`chatapp/settings/service.py`, `inference/settings.py`, with their bounds), every
other variable from the place that reads it (an AST scan of `chatapp/` and `inference/`
for `os.environ` reads and the settings modules' helpers, with the default each passes). What
code cannot say is below in `VARIABLES`: the section a variable belongs in and one line of
help, plus the default in words where the code computes it. `tests/chatapp/settings/
test_docs.py` fails when the page is stale, when code reads a variable `VARIABLES` does not
explain, or when `VARIABLES` explains one nothing reads.
"""

from __future__ import annotations

import ast
import inspect
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic_settings import BaseSettings

from chatapp.settings.service import ChatSettings, LoginSettings
from chatapp.settings.webhook import HandoffWebhookSettings
from inference.settings import (
    EngineSettings,
    OpenAIEngineSettings,
    ScaleOptions,
    WorkerSettings,
    env_name,
)

REPO = Path(__file__).resolve().parent.parent.parent
PAGE = REPO / "docs" / "configuration.md"
SCANNED = ("chatapp", "inference", "modelprep")
# The settings modules' helpers that read one variable: `helper("NAME", default, ...)`.
READERS = frozenset(
    {
        "_env_int",
        "_env_at_least_one",
        "_env_float",
        "_env_bool",
        "_env_port",
        "_number",
        "_integer",
        "_required",
    }
    | {"_list", "_bool"}
)
PYDANTIC: tuple[type[BaseSettings], ...] = (
    ChatSettings,
    LoginSettings,
    HandoffWebhookSettings,
    WorkerSettings,
    EngineSettings,
    ScaleOptions,
    OpenAIEngineSettings,
)
SECTIONS = (
    "Where things are",
    "Chat limits and liveness (web)",
    "Admission control (web)",
    "Routing and typing prefill (web)",
    "FAQ cache",
    "Inference worker",
    "Engine: vLLM",
    "Engine: an OpenAI-compatible server",
    "Database (PostgreSQL)",
    "Security and production",
    "Metrics and health",
    "Handoff webhook",
)


@dataclass(frozen=True, slots=True)
class Var:
    section: str
    help: str
    default: str | None = None  # in words, where the code computes it
    read_by: str | None = None  # not read by our Python code (Django, make, the image)


@dataclass(frozen=True, slots=True)
class Read:
    name: str
    path: str
    default: str | None  # the literal the code passes, as source; None: it passes none


@dataclass(frozen=True, slots=True)
class Row:
    name: str
    default: str
    where: str
    help: str


_WHERE, _LIMITS, _ADMIT, _ROUTE, _FAQ = SECTIONS[:5]
_WORKER, _VLLM, _OPENAI, _DB, _SECURITY, _METRICS, _WEBHOOK = SECTIONS[5:]

VARIABLES: dict[str, Var] = {
    # -- where things are
    "CHAT_DATA_DIR": Var(
        _WHERE,
        "models, caches, the SQLite database, the local secret key and the demo password",
        "`./data` (in the repository)",
    ),
    "MODEL": Var(
        _WHERE,
        "model folder for vLLM: any Hugging Face folder with a chat template "
        "([operations](operations.md#swapping-the-model))",
        "`<CHAT_DATA_DIR>/models/smollm2-135m-instruct`",
    ),
    "CHAT_TEMPLATE": Var(
        _WHERE,
        "a Jinja chat template file that replaces the model folder's own (e.g. one without "
        "Llama 3's date line)",
        "the model's own",
    ),
    "DATABASE_URL": Var(
        _WHERE,
        "any `dj-database-url` URL, e.g. `postgresql://user@host/db`",
        "SQLite in the data dir",
        read_by="dj-database-url",
    ),
    "REDIS_URL": Var(
        _WHERE,
        "Redis for the channel layer, request queue, answer logs and rate limits; set, web and "
        "workers run as separate processes",
        "unset: in-memory channel layer, the process's own Redis, worker inside the web process",
    ),
    "DJANGO_SETTINGS_MODULE": Var(
        _WHERE,
        "`chatapp.settings.production` requires `SECRET_KEY`, `ALLOWED_HOSTS` and "
        "`CSRF_TRUSTED_ORIGINS`",
        "`chatapp.settings.local`",
        read_by="Django",
    ),
    "HOST": Var(_WHERE, "address `make run` serves on", "`127.0.0.1`", read_by="make"),
    "PORT": Var(_WHERE, "port `make run` (and the image's `web` role) serves on", "`8000`", "make"),
    "DEMO_PASSWORD": Var(
        _WHERE, "password `manage.py demo_user` sets for `demo`", "random, kept in the data dir"
    ),
    "LOG_LEVEL": Var(_WHERE, "the web process's log level"),
    "VLLM_LOGGING_LEVEL": Var(_WHERE, "vLLM's own log level"),
    "CELERY_CONCURRENCY": Var(
        _WHERE, "Celery worker processes per `celery worker` (each has its own database pool)"
    ),
    "CHAT_MODEL_CACHE": Var(
        _WHERE,
        "prepare step: a folder where a trained FAQ verifier is kept by the digest of its "
        "inputs and copied from instead of training again",
    ),
    # -- chat limits and liveness
    "CHAT_MAX_FRAME_BYTES": Var(_LIMITS, "larger WebSocket frames get a `too_large` error"),
    "CHAT_MAX_MESSAGE_CHARS": Var(_LIMITS, "longest accepted message"),
    "CHAT_HISTORY_MAX_MESSAGES": Var(
        _LIMITS,
        "at most this many earlier messages go to the worker, which then keeps what fits the "
        "model's context ([answers](answers.md#long-conversations))",
    ),
    "CHAT_MAX_TOKENS": Var(
        _LIMITS,
        "cap on an answer's length; 0: the template's, else the model's default "
        "(`generation_config.json` `max_new_tokens`, else 512)",
    ),
    "CHAT_API_MODEL": Var(
        _LIMITS,
        "the model id `/v1/models` serves; requests for others get 404",
        "the model folder's name",
    ),
    "CHAT_ACCEPT_TIMEOUT_S": Var(
        _LIMITS, "no worker took the request within this long (none alive): `no_worker`"
    ),
    "CHAT_QUEUE_TIMEOUT_S": Var(
        _LIMITS, "past the accept timeout a request still waits this long while workers are busy"
    ),
    "CHAT_STALL_TIMEOUT_S": Var(
        _LIMITS,
        "no event from the worker (deltas or heartbeats) for this long: the answer moves to "
        "another worker, or fails `worker_lost` with its text so far",
    ),
    "CHAT_FIRST_TOKEN_TIMEOUT_S": Var(
        _LIMITS, "a started answer with no first token after this long fails `timeout`; 0: never"
    ),
    "CHAT_MAX_MIGRATIONS": Var(
        _LIMITS,
        "an answer whose worker dies goes on on another worker from the text already "
        "streamed, at most this many times; 0: it fails `worker_lost` at once",
    ),
    "CHAT_DISCONNECT_GRACE_S": Var(
        _LIMITS,
        "a dropped socket's answer keeps generating this long so a refresh can resume it; "
        "then it is aborted and kept as `stopped`",
    ),
    "CHAT_ANSWER_LOG_TTL_S": Var(
        _LIMITS, "how long an answer's stream log stays resumable after its last entry"
    ),
    "CHAT_RELAY_HEARTBEAT_S": Var(
        _LIMITS, "the web process owning an answer renews its ownership and leases this often"
    ),
    "CHAT_REAP_AFTER_S": Var(
        _LIMITS,
        "an owner silent this long is dead: whoever finds its answers ends them from their "
        "logs, frees their slots and cancels their worker requests",
        "0: max(5, 4 x `CHAT_RELAY_HEARTBEAT_S`)",
    ),
    "CHAT_REAP_EVERY_S": Var(_LIMITS, "how often each web process looks for dead owners' answers"),
    "CHAT_WARMUP_TIMEOUT_S": Var(
        _LIMITS, "how long a template warm-up waits for a worker before it is marked not warm"
    ),
    "CHAT_SSE_KEEPALIVE_S": Var(
        _LIMITS,
        "a streamed `/v1` answer sends a `: waiting` comment this often until its first token",
    ),
    # -- admission
    "CHAT_USER_MAX_CONCURRENT": Var(
        _ADMIT, "answers one user may have generating at once (all tabs and web processes)"
    ),
    "CHAT_USER_RATE": Var(_ADMIT, "questions one user may ask per window; past it: `rate_limited`"),
    "CHAT_USER_RATE_WINDOW_S": Var(_ADMIT, "the window of `CHAT_USER_RATE`"),
    "CHAT_ADMISSION_LEASE_S": Var(
        _ADMIT,
        "a slot its owner stopped renewing (its web process died) is freed this long after "
        "the last renewal",
        "0: max(10, 5 x `CHAT_RELAY_HEARTBEAT_S`)",
    ),
    "CHAT_BUSY_RETRY_AFTER_S": Var(_ADMIT, "the retry-after given with `busy`"),
    "CHAT_SOCKET_FRAMES_PER_S": Var(
        _ADMIT, "frames one socket may send (token bucket); past it `rate_limited`; 0: no limit"
    ),
    "CHAT_SOCKET_FRAME_BURST": Var(_ADMIT, "the bucket's size"),
    "CHAT_SOCKET_RESUMES_PER_S": Var(
        _ADMIT, "`chat.resume` frames one socket may send (each can replay a whole answer log)"
    ),
    "CHAT_SOCKET_RESUME_BURST": Var(_ADMIT, "their bucket's size"),
    "CHAT_SOCKET_DRAFTS_PER_S": Var(
        _ADMIT,
        "`chat.draft` frames (typing prefill) one socket may send; past it they are dropped "
        "quietly (each queues a prefill of the whole conversation on a worker)",
    ),
    "CHAT_SOCKET_DRAFT_BURST": Var(_ADMIT, "their bucket's size"),
    "CHAT_USER_DRAFT_EVERY_S": Var(
        _ADMIT,
        "one user's drafts over all sockets and web processes: at most one per this long, the "
        "rest dropped quietly; 0: no limit",
    ),
    "INFERENCE_MAX_QUEUE": Var(
        _ADMIT,
        "requests that may wait for one worker beyond its `INFERENCE_MAX_ACTIVE`; past the sum "
        "over live workers new questions get `busy`",
    ),
    # -- routing and typing prefill
    "CHAT_AFFINITY": Var(
        _ROUTE,
        "a conversation's next turn goes to the worker that served its last one (its history "
        "is in that engine's prefix cache) while it is alive with a free slot",
    ),
    "CHAT_AFFINITY_WAIT_S": Var(
        _ROUTE, "a turn its worker has not taken within this long goes to any worker"
    ),
    "CHAT_AFFINITY_TTL_S": Var(_ROUTE, "how long a conversation's worker is remembered"),
    "CHAT_TYPING_PREFILL": Var(
        _ROUTE,
        "while a user types, a worker prefills the prompt with the draft at background "
        "priority ([answers](answers.md#typing-prefill))",
    ),
    # -- FAQ
    "CHAT_FAQ_ENABLED": Var(_FAQ, "web: answer standalone questions from FAQ entries"),
    "INFERENCE_FAQ": Var(_FAQ, "worker: keep the FAQ index and look questions up"),
    "INFERENCE_FAQ_VERIFIER_DIR": Var(
        _FAQ, "where the verifier is", "`<CHAT_DATA_DIR>/models/faq-verifier`"
    ),
    "INFERENCE_FAQ_VERIFIER_TRAIN": Var(
        _FAQ,
        "a worker without a current verifier trains one in the background (nice 19); off: it "
        "waits for one prepared elsewhere; either way it answers exact repeats meanwhile",
    ),
    "INFERENCE_FAQ_VERIFIER_POLL_S": Var(
        _FAQ, "how often a worker waiting for its verifier looks for the prepared folder"
    ),
    "INFERENCE_FAQ_RESYNC_S": Var(
        _FAQ,
        "how often a worker checks its FAQ set against the web side's; a set unconfirmed for "
        "3 checks stops answering",
        "30",
    ),
    "CHAT_FAQ_THUMBS_DOWN_LIMIT": Var(
        _FAQ, "an entry whose answers got this many thumbs-down within the window pauses; 0: never"
    ),
    "CHAT_FAQ_THUMBS_DOWN_WINDOW_S": Var(_FAQ, "that window (7 days)"),
    # -- worker
    "INFERENCE_ENGINE": Var(
        _WORKER,
        "`vllm`; `openai` streams from a server you already run; `scripted` is a deterministic "
        "echo for tests only, not a model",
    ),
    "INFERENCE_MAX_ACTIVE": Var(_WORKER, "requests one worker serves at once"),
    "INFERENCE_MAX_BACKGROUND": Var(
        _WORKER, "background requests (warm-ups, prefills) one worker runs at once, of the above"
    ),
    "INFERENCE_COALESCE_MS": Var(
        _WORKER, "a delta is sent when this much time passed (the first token goes at once)"
    ),
    "INFERENCE_COALESCE_TOKENS": Var(_WORKER, "... or when this many tokens piled up"),
    "INFERENCE_REQUEST_CHANNEL": Var(
        _WORKER,
        "the queue chat requests are taken from (Redis stream `inference:queue:<name>`)",
        "`inference.requests`",
    ),
    "INFERENCE_BACKGROUND_CHANNEL": Var(
        _WORKER, "the queue background requests are taken from", "`inference.background`"
    ),
    "INFERENCE_HEARTBEAT_S": Var(_WORKER, "a worker heartbeats this often per running request"),
    "INFERENCE_RECLAIM_AFTER_S": Var(
        _WORKER, "a request a worker took but never accepted (it died) goes to another after this"
    ),
    "INFERENCE_DRAIN_S": Var(
        _WORKER,
        "on SIGTERM a worker takes nothing more and gives running answers this long to finish; "
        "those still running then go on on another worker",
    ),
    "INFERENCE_START_WARMUP_S": Var(
        _WORKER,
        "a starting worker warms the published templates' prefixes for up to this long before "
        "taking chat; 0: off",
    ),
    "INFERENCE_START_WARMUP_ASK_S": Var(
        _WORKER, "how long the starting worker waits for a web process to list those templates"
    ),
    "INFERENCE_STALL_S": Var(
        _WORKER, "a running answer with no new token this long after its first is aborted; 0: off"
    ),
    "INFERENCE_HEALTH_EVERY_S": Var(
        _WORKER,
        "how often the worker asks the engine whether it is healthy; a dead vLLM engine makes "
        "it leave the registry, fail its answers and exit (run it under a supervisor)",
    ),
    "INFERENCE_HEALTH_TIMEOUT_S": Var(_WORKER, "how long that check may take"),
    "INFERENCE_HEALTH_FAILURES": Var(
        _WORKER,
        "a remote engine (`INFERENCE_ENGINE=openai`) failing this many checks in a row makes the "
        "worker exit, handing its answers on to other workers (at least 1)",
    ),
    # -- vLLM
    "VLLM_DTYPE": Var(
        _VLLM,
        "`auto`: bfloat16 where the CPU or GPU has native bf16, float32 on other CPUs, float16 "
        "on other GPUs (the start-up log says which and why); or `bfloat16`, `float16`, `float32`",
        "`auto`",
    ),
    "VLLM_BLOCK_SIZE": Var(
        _VLLM,
        "KV cache block size in tokens; prefix caching reuses whole blocks, so smaller blocks "
        "re-prefill less of each turn",
        "32 on CPU, vLLM's own on GPU",
    ),
    "VLLM_MAX_NUM_SEQS": Var(_VLLM, "vLLM `max_num_seqs` (sequences in one batch)"),
    "VLLM_MAX_NUM_BATCHED_TOKENS": Var(_VLLM, "vLLM `max_num_batched_tokens`"),
    "VLLM_MAX_MODEL_LEN": Var(_VLLM, "context length"),
    "VLLM_CPU_KVCACHE_SPACE": Var(_VLLM, "KV cache size in GiB (CPU build)"),
    "VLLM_ENFORCE_EAGER": Var(
        _VLLM, "skip graph compilation: starts in ~30 s instead of minutes on CPU"
    ),
    "VLLM_PREFIX_CACHING": Var(
        _VLLM, "vLLM's automatic prefix caching; off only to measure what it buys"
    ),
    "VLLM_TENSOR_PARALLEL_SIZE": Var(_VLLM, "GPUs one model is split over"),
    "VLLM_GPU_MEMORY_UTILIZATION": Var(
        _VLLM, "share of each GPU's memory vLLM may take, in (0, 1]", "vLLM's (0.9)"
    ),
    "VLLM_QUANTIZATION": Var(
        _VLLM,
        "vLLM `quantization` (`awq`, `gptq`, `fp8`, ...); an unknown method is refused at start",
        "from the model folder",
    ),
    "VLLM_KV_OFFLOAD_GIB": Var(_VLLM, "KV cache offload to CPU memory in GiB (GPU builds)", "off"),
    "VLLM_SPECULATIVE_CONFIG": Var(
        _VLLM,
        'vLLM\'s `speculative_config` as JSON, e.g. `{"method": "ngram", '
        '"num_speculative_tokens": 4}`; the CPU build has none and the worker refuses it',
        "off",
    ),
    # -- OpenAI-compatible engine
    "OPENAI_ENGINE_URL": Var(
        _OPENAI, "base URL of the server, e.g. `http://router:8000`", "required with `openai`"
    ),
    "OPENAI_ENGINE_MODEL": Var(
        _OPENAI, "served model name", "the only model its `/v1/models` lists"
    ),
    "OPENAI_ENGINE_API_KEY": Var(_OPENAI, "bearer token for the server"),
    "OPENAI_ENGINE_SESSION_HEADER": Var(
        _OPENAI, "header carrying the conversation id, for the router's affinity", "`X-Session-ID`"
    ),
    "OPENAI_ENGINE_TIMEOUT_S": Var(_OPENAI, "connect timeout and the longest silence in a stream"),
    # -- database
    "DB_POOL": Var(_DB, "0: no pool, a connection per unit of work (only to compare)"),
    "DB_POOL_MAX_SIZE": Var(_DB, "connections each process's pool may open"),
    "DB_POOL_MIN_SIZE": Var(_DB, "connections each pool keeps open"),
    "DB_POOL_TIMEOUT_S": Var(
        _DB, "a request that finds every pooled connection busy waits this long, then gets 503"
    ),
    "DB_POOL_MAX_IDLE_S": Var(_DB, "idle connections above the minimum close after this"),
    "DB_CONNECT_TIMEOUT_S": Var(_DB, "how long connecting to an unreachable server may take"),
    "DB_STATEMENT_TIMEOUT_S": Var(
        _DB, "a statement running longer is cancelled; 0: no limit (for a long manual migration)"
    ),
    # -- security and production
    "SECRET_KEY": Var(
        _SECURITY,
        "Django's secret key; production refuses one shorter than 50 characters",
        "generated into the data dir (local); required (production)",
    ),
    "ALLOWED_HOSTS": Var(
        _SECURITY,
        "comma-separated host names",
        "`localhost`, `127.0.0.1`, `[::1]` (local); required (production)",
    ),
    "CSRF_TRUSTED_ORIGINS": Var(
        _SECURITY,
        "comma-separated origins with scheme; also the WebSocket origin check",
        "none: only the page's own origin (local); required (production)",
    ),
    "DEBUG": Var(
        _SECURITY,
        "local settings only: Django's debug pages; 1 or 0, or auto: on only for the embedded "
        "default (neither REDIS_URL nor DATABASE_URL set)",
    ),
    "CHAT_TLS_CERT_FILE": Var(
        _SECURITY,
        "`manage.py serve` terminates TLS itself with this PEM certificate chain, and offers "
        "HTTP/2 by ALPN ([operations](operations.md#deploy)); with `CHAT_TLS_KEY_FILE`",
    ),
    "CHAT_TLS_KEY_FILE": Var(_SECURITY, "the private key (PEM) of `CHAT_TLS_CERT_FILE`"),
    "SECURE_SSL_REDIRECT": Var(
        _SECURITY, "production: redirect plain HTTP to HTTPS (except `/healthz`, `/metrics`)"
    ),
    "SECURE_HSTS_SECONDS": Var(_SECURITY, "production: HSTS max-age"),
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": Var(_SECURITY, "production: HSTS for subdomains too"),
    "STATIC_ROOT": Var(
        _SECURITY, "production: where `collectstatic` puts files", "`<CHAT_DATA_DIR>/staticfiles`"
    ),
    "LOGIN_FAILURE_LIMIT": Var(
        _SECURITY, "failed logins of one username, or from one address, that lock it (HTTP 429)"
    ),
    "LOGIN_COOLOFF_S": Var(_SECURITY, "how long that lock lasts"),
    "LOGIN_THROTTLE_PROXY_COUNT": Var(
        _SECURITY,
        "reverse proxies that append to `X-Forwarded-For`: set it behind proxies, or one "
        "lockout locks everybody out",
        "0 (production: 1)",
    ),
    # -- metrics and health
    "METRICS_TOKEN": Var(_METRICS, "`/metrics` needs this bearer token when set"),
    "METRICS_ALLOWED_NETS": Var(_METRICS, "without a token, the networks that may read `/metrics`"),
    "INFERENCE_METRICS_PORT": Var(_METRICS, "a standalone worker's Prometheus port; 0: off"),
    "INFERENCE_METRICS_HOST": Var(_METRICS, "... and address", "`127.0.0.1`"),
    "INFERENCE_HEALTH_FILE": Var(
        _METRICS,
        "a file the worker touches on every heartbeat once its model is loaded (the container "
        "healthcheck reads its age)",
    ),
    # -- handoff webhook
    "CHAT_HANDOFF_WEBHOOK_URL": Var(
        _WEBHOOK,
        "where every handoff change and message is POSTed, signed, for a team's helpdesk "
        "([handoff](handoff.md#webhook)); unset: no webhook",
    ),
    "CHAT_HANDOFF_WEBHOOK_SECRET": Var(
        _WEBHOOK,
        "the shared secret deliveries are signed with (HMAC-SHA256), at least 16 characters; "
        "required with a URL (start-up stops without it)",
    ),
    "CHAT_HANDOFF_WEBHOOK_TIMEOUT_S": Var(
        _WEBHOOK, "one attempt waits this long for the receiver; slower counts as failed"
    ),
    "CHAT_HANDOFF_WEBHOOK_ATTEMPTS": Var(
        _WEBHOOK,
        "a delivery not accepted (2xx) after this many attempts, 10 s apart doubling to 10 min, "
        "is given up: status `failed` in admin",
    ),
}


def _is_environ(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def _reads_in(tree: ast.AST, path: str) -> Iterator[Read]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = node.args[0]
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            continue
        func = node.func
        reads = (
            isinstance(func, ast.Attribute)
            and (func.attr == "getenv" or (func.attr == "get" and _is_environ(func.value)))
        ) or (isinstance(func, ast.Name) and func.id in READERS)
        if reads:
            default = ast.unparse(node.args[1]) if len(node.args) > 1 else None
            yield Read(name.value, path, default)


def env_reads(root: Path = REPO) -> list[Read]:
    """Every `os.environ.get("NAME", default)` (and helper) call in the scanned packages."""
    found: list[Read] = []
    for package in SCANNED:
        for file in sorted((root / package).rglob("*.py")):
            if "migrations" not in file.parts:
                path = file.relative_to(root).as_posix()
                found.extend(_reads_in(ast.parse(file.read_text(encoding="utf-8")), path))
    return found


def _literal(source: str) -> str:
    value = ast.literal_eval(source)
    if value in ("", None):
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def _bounds(metadata: list[object]) -> str:
    words = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
    parts = [
        f"{sign} {getattr(item, key):g}"
        for item in metadata
        for key, sign in words.items()
        if hasattr(item, key)
    ]
    return f" ({', '.join(parts)})" if parts else ""


def _pydantic_rows() -> Iterator[tuple[str, str, str]]:
    """(name, default, declared in) of each declared setting; a default the code computes
    (a factory) is ''; the words for it are in `VARIABLES`."""
    for model in PYDANTIC:
        where = Path(inspect.getfile(model)).relative_to(REPO).as_posix()
        for field_name, info in model.model_fields.items():
            if isinstance(info.annotation, type) and issubclass(info.annotation, BaseSettings):
                continue  # nested: its own fields are rows
            name = env_name(model, field_name)
            default = info.default
            if info.default_factory is not None:
                shown = ""
            elif default is None or default == "":
                shown = "unset"
            elif isinstance(default, bool):
                shown = "`true`" if default else "`false`"
            elif isinstance(default, float) and default.is_integer():
                shown = f"`{int(default)}`"
            else:
                shown = f"`{default}`"
            yield name, shown and f"{shown}{_bounds(list(info.metadata))}", where


def rows(reads: list[Read] | None = None) -> list[Row]:
    """One row per variable; ValueError names what `VARIABLES` lacks or has too much of."""
    reads = env_reads() if reads is None else reads
    where: dict[str, set[str]] = {}
    defaults: dict[str, set[str]] = {}
    for read in reads:
        where.setdefault(read.name, set()).add(read.path)
        if read.default is not None:
            defaults.setdefault(read.name, set()).add(read.default)
    declared: dict[str, str] = {}
    for name, default, declared_in in _pydantic_rows():
        where.setdefault(name, set()).add(declared_in)
        if default:
            declared[name] = default
    problems = [
        f"{name} is read in {', '.join(sorted(paths))} but not explained in VARIABLES"
        for name, paths in sorted(where.items())
        if name not in VARIABLES
    ]
    problems += [
        f"{name} is explained in VARIABLES but nothing reads it"
        for name, var in VARIABLES.items()
        if name not in where and var.read_by is None
    ]
    result = []
    for name, var in VARIABLES.items():
        if var.default is not None:
            default = var.default
        elif name in declared:
            default = declared[name]
        elif len(defaults.get(name, ())) == 1:
            default = _literal(next(iter(defaults[name])))
        else:
            problems.append(f"{name}: the code passes no single literal default; give one")
            continue
        places = ", ".join(f"`{p}`" for p in sorted(where.get(name, ())))
        result.append(Row(name, default, places or str(var.read_by), var.help))
    if problems:
        raise ValueError("docs/configuration.md cannot be generated:\n" + "\n".join(problems))
    return result


def page(table: list[Row] | None = None) -> str:
    table = rows() if table is None else table
    lines = [
        "# Configuration",
        "",
        "<!-- Generated by `python -m chatapp.settings.docs` (`make docs`) from the settings",
        "     objects and the code that reads each variable; edit chatapp/settings/docs.py, not",
        "     this page. tests/chatapp/settings/test_docs.py fails when it is stale. -->",
        "",
        "Everything is an environment variable; nothing needs setting for `make run`. A value",
        "that is not a number, or out of its bounds, stops start-up with an error naming the",
        "variable. Booleans take `1/0`, `true/false`, `yes/no`, `on/off`. Docker Compose's own",
        "variables (`.env`: profiles, ports, volumes) are in [operations](operations.md).",
        "",
    ]
    for section in SECTIONS:
        lines += [
            f"## {section}",
            "",
            "| variable | default | meaning | read in |",
            "|---|---|---|---|",
        ]
        for row in table:
            if VARIABLES[row.name].section == section:
                lines.append(f"| `{row.name}` | {row.default} | {row.help} | {row.where} |")
        lines.append("")
    lines += [
        "## Putting it all together",
        "",
        "The embedded default needs none of these. A two-process deployment sets `REDIS_URL` and",
        "`DATABASE_URL`; production adds `DJANGO_SETTINGS_MODULE=chatapp.settings.production`",
        "with `SECRET_KEY`, `ALLOWED_HOSTS` and `CSRF_TRUSTED_ORIGINS`; a GPU worker sets",
        "`MODEL`. The rest are tuning knobs with measured defaults: change one, measure it",
        "(`bench/`), and keep the number beside the change.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = page()
    if args == ["--check"]:
        if PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE} is stale: run `make docs`", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(REPO)} ({len(table_names(text))} variables)")
    return 0


def table_names(text: str) -> list[str]:
    return [line.split("`")[1] for line in text.splitlines() if line.startswith("| `")]


if __name__ == "__main__":
    sys.exit(main())
