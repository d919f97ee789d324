"""The web process's Prometheus metrics, in vLLM's naming style (docs/metrics.md).

`chat:` prefix, base units (seconds, bytes), `_total` on counters. Everything lives in
prometheus_client's process-wide default registry, so the embedded inference worker's
metrics (`inference/metrics.py`) appear in the same `/metrics`. The `_created` series are
off: they double the series count and `chat:request_frame_bytes` (histogram) and
`chat:request_frame_bytes_total` (counter) would both claim `chat:request_frame_bytes_created`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import prometheus_client
from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

# Latency buckets like vLLM's: fine below a second (a prefix-cache hit on CPU is ~100 ms),
# coarse up to the minutes a long answer on a busy CPU can take.
_TTFT_BUCKETS = (
    0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75,
    1.0, 1.5, 2.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
_ITL_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
)  # fmt: skip
_E2E_BUCKETS = (
    0.1, 0.25, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 60.0,
    120.0, 240.0, 480.0,
)  # fmt: skip
_QUEUE_BUCKETS = (
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
)  # fmt: skip
_BYTES_BUCKETS = tuple(float(2**n) for n in range(5, 18))  # 32 B .. 128 KiB

# ---- answers (recorded once per answer, by the relay that owns it) -------------------------

TIME_TO_FIRST_TOKEN = Histogram(
    "chat:time_to_first_token_seconds",
    "Server-side time to first token, as the worker reports it in inference.done (ttft_ms).",
    ["source"],
    buckets=_TTFT_BUCKETS,
)
INTER_TOKEN_LATENCY = Histogram(
    "chat:inter_token_latency_seconds",
    "Mean time between tokens of one answer: (total_ms - ttft_ms) / (completion_tokens - 1), "
    "one observation per answer with at least two tokens.",
    buckets=_ITL_BUCKETS,
)
E2E_REQUEST_LATENCY = Histogram(
    "chat:e2e_request_latency_seconds",
    "From the web process handing the request to its relay until the answer completed.",
    ["source"],
    buckets=_E2E_BUCKETS,
)
REQUEST_QUEUE_TIME = Histogram(
    "chat:request_queue_time_seconds",
    "From the request being sent until a worker took it (queue_wait_ms).",
    buckets=_QUEUE_BUCKETS,
)
FAQ_REQUESTS = Counter(
    "chat:faq_requests_total",
    "Answers to requests that asked the FAQ cache first: hit (answered from a FAQ entry) or "
    "miss (answered by the model, stopped or failed).",
    ["result"],
)
PROMPT_TOKENS = Counter("chat:prompt_tokens_total", "Prompt tokens of ended answers.")
CACHED_PROMPT_TOKENS = Counter(
    "chat:cached_prompt_tokens_total",
    "Prompt tokens served from vLLM's prefix cache (hit rate = this / chat:prompt_tokens_total).",
)
GENERATION_TOKENS = Counter("chat:generation_tokens_total", "Tokens generated for answers.")
ANSWERS = Counter(
    "chat:answers_total", "Answers that ended, by source and status.", ["source", "status"]
)
ERRORS = Counter(
    "chat:errors_total",
    "chat.error frames refusing a client frame, plus each answer that failed (once per answer, "
    "however many sockets watched it), by error code.",
    ["code"],
)
ANSWER_WRITES_FENCED = Counter(
    "chat:answer_writes_fenced_total",
    "Final writes of an answer that matched no streaming row of their run (the run had ended, "
    "or a regenerate/edit had started a newer one): logged and not stored.",
)
ANSWERS_MIGRATED = Counter(
    "chat:answers_migrated_total",
    "Answers whose worker died mid-answer and that went on on another worker.",
)

# ---- the browser's own measurement ---------------------------------------------------------

CLIENT_TIME_TO_FIRST_TOKEN = Histogram(
    "chat:client_time_to_first_token_seconds",
    "Time to first token as the browser measured it: from sending the frame to painting the "
    "answer's first token (chat.client_timing).",
    buckets=_TTFT_BUCKETS,
)

# ---- what the browser sends ----------------------------------------------------------------

REQUEST_FRAME_BYTES = Histogram(
    "chat:request_frame_bytes",
    "Bytes of each chat.send / chat.edit frame that started an answer, as received.",
    ["kind"],
    buckets=_BYTES_BUCKETS,
)
REQUEST_PROMPT_BYTES = Counter(
    "chat:request_prompt_bytes_total",
    "UTF-8 bytes of the full user text those frames stand for (template rendered, patch applied).",
    ["kind"],
)


class _FrameBytesTotal:
    """`chat:request_frame_bytes_total`, a counter beside the histogram of the same stem.

    prometheus_client refuses to register a Counter whose name clashes with a Histogram's, so
    this one is a plain collector; in the exposition they are two distinct families.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: dict[str, float] = {}

    def inc(self, kind: str, amount: float) -> None:
        with self._lock:
            self._totals[kind] = self._totals.get(kind, 0.0) + amount

    def describe(self) -> list[CounterMetricFamily]:
        # Declares no names: the registry would take the counter's family name
        # `chat:request_frame_bytes` for a clash with the histogram's.
        return []

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "chat:request_frame_bytes_total",
            "Bytes of chat.send / chat.edit frames that started an answer, as received.",
            labels=["kind"],
        )
        with self._lock:
            totals = dict(self._totals)
        for kind, total in sorted(totals.items()):
            family.add_metric([kind], total)
        yield family


REQUEST_FRAME_BYTES_TOTAL = _FrameBytesTotal()
_collector: Collector = REQUEST_FRAME_BYTES_TOTAL
REGISTRY.register(_collector)

# ---- load ----------------------------------------------------------------------------------

ACTIVE_STREAMS = Gauge(
    "chat:active_streams", "Answers generating that this web process's relay owns."
)
ADMISSION_IN_FLIGHT = Gauge(
    "chat:admission_in_flight",
    "Requests admitted and not yet released, service-wide with Redis (every web process "
    "reports the same number: use max(), not sum()); sampled every relay heartbeat.",
)
ADMISSION_REFUSALS = Counter(
    "chat:admission_refusals_total",
    "New answers refused by admission control, by reason.",
    ["reason"],
)

# ---- handoff to a person (recorded by the socket that made each change: chatapp/realtime) ---

_HUMAN_BUCKETS = (
    1.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 14400.0, 86400.0,
)  # fmt: skip
HANDOFFS = Counter(
    "chat:handoffs_total",
    "Changes of who answers a conversation (docs/handoff.md), by action: request (a customer "
    "asked for a person), cancel, claim, transfer, release (back to the assistant), close.",
    ["action"],
)
HANDOFF_FIRST_RESPONSE = Histogram(
    "chat:handoff_first_response_seconds",
    "From a customer asking for a person to that person's first message.",
    buckets=_HUMAN_BUCKETS,
)
HANDOFFS_WAITING = Gauge(
    "chat:handoffs_waiting",
    "Customers waiting for a person, service-wide, set at every change (every web process "
    "reports the last number it saw: use max(), not sum()).",
)
