"""One request's measurements, a sweep point's summary, the sustained rate and the goals.

Pure: no sockets, no processes, so the numbers the report states can be tested.

Definitions (the report repeats them):

* TTFT: send -> the first piece of answer text (first `chat.delta`; first streamed chunk
  with non-blank text in OpenAI mode, since the app strips the space every answer starts with
  and never sends a blank first delta).
* ITL: the gaps between consecutive delta frames / chunks of one answer, pooled over the
  point's answers. `chat.delta` frames carry no token counts and the app coalesces tokens
  (15 ms / 8 tokens in `full`), so ITL is per frame, not per token. TPOT, (E2E - TTFT) /
  (completion tokens - 1), is the per-token figure comparable across configurations.
* E2E: send -> `chat.done` (end of the stream in OpenAI mode).
* Throughput: completed requests, and model output tokens, per second from the first send to
  the last completion. FAQ answers report 0 completion tokens (no model ran).
* Keep-up (open loop): did the server keep pace with the arrivals? The fraction completed
  times (arrival span + a near-idle P95 E2E) / (first send -> last completion), capped at 1.
  A server that keeps up finishes the last request about one E2E after it arrived (1.0); one
  that falls behind needs longer to drain its queue, one that refuses requests (`busy`)
  completes fewer (below 1). The near-idle E2E is the P95 of the configuration's own lowest
  swept rate. The plain ratio of achieved to offered throughput would not do with the few
  requests per point a CPU allows: at 4 req/s, 16 requests arrive within 4 s, and one long
  answer at the end would read as falling behind.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from bench.harness import percentile

Status = Literal["ok", "busy", "error"]
KEEP_UP_MIN = 0.9


@dataclass(kw_only=True)
class Outcome:
    """One request as the client saw it; times in seconds."""

    index: int
    kind: str
    scheduled_s: float  # when it was due, after the point's start
    sent_s: float = math.nan  # when it was actually sent, after the point's start
    status: Status = "error"
    error: str | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    frames: int = 0
    prompt_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    completion_tokens: int | None = None
    source: str | None = None  # "model" / "faq" from chat.done; "model" in OpenAI mode
    finish_reason: str | None = None
    # the app's own view (chat.done timings): waiting for a worker, and the worker's TTFT
    # (its FAQ lookup included)
    queue_wait_ms: float | None = None
    server_ttft_ms: float | None = None
    answer: str = ""

    @property
    def done_s(self) -> float | None:
        """When it completed, after the point's start."""
        return None if self.e2e_s is None else self.sent_s + self.e2e_s

    @property
    def tpot_s(self) -> float | None:
        tokens = self.completion_tokens or 0
        if self.ttft_s is None or self.e2e_s is None or tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (tokens - 1)

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"tpot_s": self.tpot_s}


@dataclass(frozen=True, kw_only=True)
class Quantiles:
    p50: float
    p95: float
    p99: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Quantiles:
        return cls(
            p50=percentile(values, q=0.50),
            p95=percentile(values, q=0.95),
            p99=percentile(values, q=0.99),
        )


@dataclass(frozen=True, kw_only=True)
class PointSummary:
    config: str
    load: float  # the offered rate (req/s), or the concurrency in closed-loop mode
    requests: int
    ok: int
    busy: int
    errors: int
    ttft: Quantiles
    itl: Quantiles
    tpot: Quantiles
    e2e: Quantiles
    request_throughput: float
    output_tokens_per_s: float
    keep_up: float
    faq_requests: int
    faq_hits: int
    other_faq_answers: int  # answered from the FAQ although not an FAQ paraphrase
    prefix_cache_hit_rate: float  # cached / prompt tokens (NaN: not reported)
    prefix_cache_source: str
    ttft_model: Quantiles  # TTFT of the answers the model wrote (FAQ answers left out)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarise(
    outcomes: Sequence[Outcome],
    *,
    config: str,
    load: float,
    offered_rate: float | None,
    prefix_cache: tuple[float, float] | None = None,
    idle_e2e_s: float | None = None,
) -> PointSummary:
    """The point's statistics; `prefix_cache` = (hit tokens, query tokens) from a server's
    metrics, else the rate comes from the answers' usage (cached / prompt tokens)."""
    ok = [o for o in outcomes if o.status == "ok"]
    ttft = [o.ttft_s for o in ok if o.ttft_s is not None]
    e2e = [o.e2e_s for o in ok if o.e2e_s is not None]
    itl = [gap for o in ok for gap in o.itl_s]
    tpot = [t for o in ok if (t := o.tpot_s) is not None]
    model_ttft = [o.ttft_s for o in ok if o.ttft_s is not None and o.source != "faq"]
    sent = [o.sent_s for o in outcomes if not math.isnan(o.sent_s)]
    done = sorted(d for o in ok if (d := o.done_s) is not None)
    span = (done[-1] - min(sent)) if done and sent else math.nan
    tokens = sum(o.completion_tokens or 0 for o in ok)
    if prefix_cache is not None:
        hits, queries = prefix_cache
        source = "server /metrics"
    else:
        hits = float(sum(o.cached_prompt_tokens or 0 for o in ok if o.source != "faq"))
        queries = float(sum(o.prompt_tokens or 0 for o in ok if o.source != "faq"))
        source = "chat.done usage"
    return PointSummary(
        config=config,
        load=load,
        requests=len(outcomes),
        ok=len(ok),
        busy=sum(1 for o in outcomes if o.status == "busy"),
        errors=sum(1 for o in outcomes if o.status == "error"),
        ttft=Quantiles.of(ttft),
        itl=Quantiles.of(itl),
        tpot=Quantiles.of(tpot),
        e2e=Quantiles.of(e2e),
        request_throughput=len(ok) / span if span > 0 else math.nan,
        output_tokens_per_s=tokens / span if span > 0 else math.nan,
        keep_up=keep_up(
            outcomes,
            offered=offered_rate is not None,
            idle_e2e_s=Quantiles.of(e2e).p95 if idle_e2e_s is None else idle_e2e_s,
        ),
        faq_requests=sum(1 for o in outcomes if o.kind == "faq"),
        faq_hits=sum(1 for o in ok if o.kind == "faq" and o.source == "faq"),
        other_faq_answers=sum(1 for o in ok if o.kind != "faq" and o.source == "faq"),
        prefix_cache_hit_rate=hits / queries if queries > 0 else math.nan,
        prefix_cache_source=source,
        ttft_model=Quantiles.of(model_ttft),
    )


def keep_up(outcomes: Sequence[Outcome], *, offered: bool, idle_e2e_s: float) -> float:
    """Completed fraction x (arrival span + `idle_e2e_s`) / actual duration, capped at 1;
    NaN in closed-loop mode or when nothing completed."""
    done = [d for o in outcomes if o.status == "ok" and (d := o.done_s) is not None]
    if not offered or not done or math.isnan(idle_e2e_s):
        return math.nan
    first_send = min(o.sent_s for o in outcomes)
    arrival_span = max(o.scheduled_s for o in outcomes) - min(o.scheduled_s for o in outcomes)
    duration = max(done) - first_send
    pace = min(1.0, (arrival_span + idle_e2e_s) / duration) if duration > 0 else 1.0
    return len(done) / len(outcomes) * pace


def sustained_rate(points: Iterable[PointSummary], *, ttft_target_s: float) -> float | None:
    """The highest offered rate whose P95 TTFT is within the target and whose keep-up is at
    least 90 %; None when no swept rate qualifies."""
    good = [
        p.load
        for p in points
        if p.ttft.p95 <= ttft_target_s and p.keep_up >= KEEP_UP_MIN and p.ok > 0
    ]
    return max(good) if good else None


# ---- the goals ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Goal:
    name: str
    verdict: str  # "met", "missed" or "not measured"
    detail: str


def _by_load(points: Iterable[PointSummary], config: str) -> dict[float, PointSummary]:
    return {p.load: p for p in points if p.config == config}


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 and not math.isnan(a) and not math.isnan(b) else math.nan


def _against_full(
    points: Sequence[PointSummary], other: str
) -> tuple[dict[float, PointSummary], dict[float, PointSummary], list[float]]:
    """`full`'s and `other`'s points by load, and the loads both measured (sorted)."""
    ours, theirs = _by_load(points, "full"), _by_load(points, other)
    return ours, theirs, sorted(set(ours) & set(theirs))


def _not_measured(name: str, other: str) -> Goal:
    return Goal(name=name, verdict="not measured", detail=f"needs configs full and {other}")


def goal_vs_vllm(points: Sequence[PointSummary], *, limit: float = 1.10) -> Goal:
    """`full`'s TTFT (P50 and P95, all requests) within `limit` x vLLM's server at every load."""
    name = f"TTFT within {limit:.2f}x of vLLM's own server at equal load"
    ours, theirs, common = _against_full(points, "vllm")
    if not common:
        return _not_measured(name, "vllm")
    parts, met = [], True
    for load in common:
        p50 = _ratio(ours[load].ttft.p50, theirs[load].ttft.p50)
        p95 = _ratio(ours[load].ttft.p95, theirs[load].ttft.p95)
        model = _ratio(ours[load].ttft_model.p50, theirs[load].ttft.p50)
        met = met and p50 <= limit and p95 <= limit
        parts.append(
            f"{load:g}: P50 {p50:.2f}x, P95 {p95:.2f}x (model-answered only, P50 {model:.2f}x)"
        )
    return Goal(name=name, verdict="met" if met else "missed", detail="; ".join(parts))


def goal_p99_vs_baseline(points: Sequence[PointSummary], *, factor: float = 3.0) -> Goal:
    """Baseline P99 TTFT / `full` P99 TTFT at least `factor`, at every common load."""
    name = f"P99 TTFT at least {factor:g}x lower than the baseline"
    ours, base, common = _against_full(points, "baseline")
    if not common:
        return _not_measured(name, "baseline")
    ratios = {load: _ratio(base[load].ttft.p99, ours[load].ttft.p99) for load in common}
    met_at = [load for load, r in ratios.items() if r >= factor]
    detail = "; ".join(f"{load:g}: {r:.2f}x" for load, r in ratios.items())
    verdict = "met" if len(met_at) == len(common) else "missed"
    return Goal(name=name, verdict=verdict, detail=f"{detail} (met at {len(met_at)}/{len(common)})")


def goal_sustained(
    points: Sequence[PointSummary], *, ttft_target_s: float, factor: float = 3.2
) -> Goal:
    name = f"sustained rate within the TTFT target at least {factor:g}x the baseline's"
    configs = {p.config for p in points}
    if not {"full", "baseline"} <= configs:
        return _not_measured(name, "baseline")
    ours = sustained_rate([p for p in points if p.config == "full"], ttft_target_s=ttft_target_s)
    base = sustained_rate(
        [p for p in points if p.config == "baseline"], ttft_target_s=ttft_target_s
    )
    loads = sorted({p.load for p in points})
    if ours is None:
        return Goal(name=name, verdict="missed", detail="full sustains none of the swept rates")
    if base is None:
        return Goal(
            name=name,
            verdict="not measured",
            detail=f"full sustains {ours:g} req/s; the baseline none of {loads} (sweep lower "
            "rates to get a ratio)",
        )
    ratio = ours / base
    top = ours == max(loads)
    detail = f"full {ours:g} req/s, baseline {base:g} req/s: {ratio:.2f}x"
    if top:
        detail += " (full sustained the highest swept rate: the ratio is a lower bound)"
    verdict = "met" if ratio >= factor else ("missed" if not top else "not measured")
    return Goal(name=name, verdict=verdict, detail=detail)


def sustained_by_config(
    points: Sequence[PointSummary], *, ttft_target_s: float
) -> Mapping[str, float | None]:
    configs = list(dict.fromkeys(p.config for p in points))
    return {
        c: sustained_rate([p for p in points if p.config == c], ttft_target_s=ttft_target_s)
        for c in configs
    }
