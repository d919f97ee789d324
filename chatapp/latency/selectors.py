"""Latency report for the admin dashboard, read from stored answers.

Every finished assistant message (complete, stopped or failed) carries its numbers (server
TTFT, the browser's TTFT, tokens, source, error code), so the report works for any number of
web and worker processes and survives restarts. One bounded query reads the window's answers,
newest first, at most `row_cap` of them; buckets and percentiles are computed here in Python
(the same code on SQLite and PostgreSQL, and percentiles that are exact, see percentiles.py).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone

from chatapp.conversations.models import Message
from chatapp.errors import ApplicationError
from chatapp.latency.handoffs import HandoffSummary, handoff_summary
from chatapp.latency.percentiles import percentiles

BUCKETS = 60
# Rows read for one report: about 10 numbers each, a few MB of Python objects at most.
ROW_CAP = 50_000
QUANTILES = (50, 95, 99)
_FINISHED = (Message.Status.COMPLETE, Message.Status.STOPPED, Message.Status.FAILED)
_ANSWERED = (Message.Status.COMPLETE, Message.Status.STOPPED)


@dataclass(frozen=True, slots=True)
class Window:
    key: str
    label: str
    seconds: int

    @property
    def bucket_seconds(self) -> int:
        return self.seconds // BUCKETS

    @property
    def bucket_label(self) -> str:
        """The bucket size for people: "1 min", "2 h 48 min"."""
        hours, minutes = divmod(self.bucket_seconds // 60, 60)
        return " ".join(
            part
            for part in (f"{hours} h" if hours else "", f"{minutes} min" if minutes else "")
            if part
        )


WINDOWS: dict[str, Window] = {
    w.key: w
    for w in (
        Window("1h", "Last hour", 3600),
        Window("6h", "Last 6 hours", 6 * 3600),
        Window("24h", "Last 24 hours", 24 * 3600),
        Window("7d", "Last 7 days", 7 * 24 * 3600),
    )
}
DEFAULT_WINDOW = "1h"


def window_get(*, key: str) -> Window:
    window = WINDOWS.get(key)
    if window is None:
        raise ApplicationError(f"Unknown window {key[:20]!r}: choose one of {', '.join(WINDOWS)}.")
    return window


@dataclass(frozen=True, slots=True)
class Quantiles:
    p50: float | None
    p95: float | None
    p99: float | None
    count: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Quantiles:
        p50, p95, p99 = (_round(v) for v in percentiles(values, QUANTILES))
        return cls(p50=p50, p95=p95, p99=p99, count=len(values))


@dataclass(frozen=True, slots=True)
class _Row:
    """One finished answer's numbers (the only columns the report reads)."""

    finished_at: datetime
    status: str
    source: str
    error_code: str
    ttft_ms: float | None
    client_ttft_ms: float | None
    prompt_tokens: int | None
    cached_prompt_tokens: int | None
    completion_tokens: int | None


# The columns read, in _Row's order: rows come back as tuples (much cheaper than dicts).
_ROW_FIELDS = tuple(f.name for f in fields(_Row))


@dataclass(slots=True)
class _Answers:
    """The answers of one bucket (or of the whole window), as lists and sums."""

    statuses: Counter[str] = field(default_factory=Counter)
    error_codes: Counter[str] = field(default_factory=Counter)
    faq: int = 0
    ttft_ms: list[float] = field(default_factory=list)
    client_ttft_ms: list[float] = field(default_factory=list)
    prompt_tokens: int = 0  # model answers that report both token counts
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, row: _Row) -> None:
        self.statuses[row.status] += 1
        if row.error_code:
            self.error_codes[row.error_code] += 1
        if row.source == "faq" and row.status in _ANSWERED:
            self.faq += 1
        if row.ttft_ms is not None:
            self.ttft_ms.append(row.ttft_ms)
        if row.client_ttft_ms is not None:
            self.client_ttft_ms.append(row.client_ttft_ms)
        if (
            row.source == "model"
            and row.prompt_tokens is not None
            and row.cached_prompt_tokens is not None
        ):
            self.prompt_tokens += row.prompt_tokens
            self.cached_prompt_tokens += row.cached_prompt_tokens
        self.completion_tokens += row.completion_tokens or 0

    @property
    def count(self) -> int:
        return sum(self.statuses.values())

    @property
    def answered(self) -> int:
        return sum(self.statuses[s] for s in _ANSWERED)

    def faq_hit_rate(self) -> float | None:
        """Share of answers that ended with text (complete or stopped) served by the FAQ."""
        return _ratio(self.faq, self.answered)

    def prefix_cache_hit_rate(self) -> float | None:
        """Prompt tokens the engine found in its prefix cache, over model answers' prompts."""
        return _ratio(self.cached_prompt_tokens, self.prompt_tokens)


@dataclass(frozen=True, slots=True)
class Summary:
    answers: int
    complete: int
    stopped: int
    failed: int
    faq_answers: int
    ttft_ms: Quantiles
    client_ttft_ms: Quantiles
    faq_hit_rate: float | None
    prefix_cache_hit_rate: float | None
    answers_per_minute: float | None
    tokens_per_second: float | None
    errors: list[tuple[str, int]]  # (error_code, count), most frequent first


@dataclass(frozen=True, slots=True)
class Buckets:
    start: list[int]  # each bucket's start, Unix seconds
    answers: list[int]
    ttft_ms: dict[str, list[float | None]]  # "p50"/"p95"/"p99" -> one value per bucket
    client_ttft_ms: dict[str, list[float | None]]
    faq_hit_rate: list[float | None]
    prefix_cache_hit_rate: list[float | None]
    answers_per_minute: list[float | None]
    tokens_per_second: list[float | None]


@dataclass(frozen=True, slots=True)
class LatencyReport:
    window: Window
    start: datetime  # the first bucket's start (a multiple of the bucket size)
    now: datetime
    rows: int
    row_cap: int
    # More answers than row_cap finished in the window: only the newest were read, those
    # since `covered_from`; older buckets show nothing.
    capped: bool
    covered_from: datetime
    buckets: Buckets
    summary: Summary
    handoffs: HandoffSummary

    def as_json(self) -> dict[str, Any]:
        return {
            "window": self.window.key,
            "window_label": self.window.label,
            "bucket_seconds": self.window.bucket_seconds,
            "bucket_label": self.window.bucket_label,
            "start": self.start.isoformat(),
            "now": self.now.isoformat(),
            "rows": self.rows,
            "row_cap": self.row_cap,
            "capped": self.capped,
            "covered_from": self.covered_from.isoformat(),
            "buckets": {
                "start": self.buckets.start,
                "answers": self.buckets.answers,
                "ttft_ms": self.buckets.ttft_ms,
                "client_ttft_ms": self.buckets.client_ttft_ms,
                "faq_hit_rate": self.buckets.faq_hit_rate,
                "prefix_cache_hit_rate": self.buckets.prefix_cache_hit_rate,
                "answers_per_minute": self.buckets.answers_per_minute,
                "tokens_per_second": self.buckets.tokens_per_second,
            },
            "summary": {
                "answers": self.summary.answers,
                "complete": self.summary.complete,
                "stopped": self.summary.stopped,
                "failed": self.summary.failed,
                "faq_answers": self.summary.faq_answers,
                "ttft_ms": _quantiles_json(self.summary.ttft_ms),
                "client_ttft_ms": _quantiles_json(self.summary.client_ttft_ms),
                "faq_hit_rate": self.summary.faq_hit_rate,
                "prefix_cache_hit_rate": self.summary.prefix_cache_hit_rate,
                "answers_per_minute": self.summary.answers_per_minute,
                "tokens_per_second": self.summary.tokens_per_second,
                "errors": [{"code": c, "count": n} for c, n in self.summary.errors],
            },
            "handoffs": self.handoffs.as_json(),
        }


def latency_report(
    *,
    window: Window,
    now: datetime | None = None,
    row_cap: int | None = None,
    site_id: int | None = None,
) -> LatencyReport:
    """The window's answers in BUCKETS equal buckets, and a summary of the whole window.

    Buckets are aligned to multiples of the bucket size (since the Unix epoch), so a refresh
    a few seconds later shows the same buckets; the last one ends after `now` and is partial
    (its rates are divided by the time it has covered so far). The window therefore covers
    between BUCKETS - 1 and BUCKETS bucket lengths up to now. `site_id`: only the answers to
    that website's guests (its widget).
    """
    now = now or timezone.now()
    row_cap = ROW_CAP if row_cap is None else row_cap
    step = window.bucket_seconds
    end_s = math.floor(now.timestamp() / step) * step + step
    start_s = end_s - BUCKETS * step
    start = datetime.fromtimestamp(start_s, tz=UTC)
    query = (
        Message.objects.filter(
            role=Message.Role.ASSISTANT,
            status__in=_FINISHED,
            finished_at__gte=start,
            finished_at__lte=now,
        )
        .order_by("-finished_at")
        .values_list(*_ROW_FIELDS)
    )
    if site_id is not None:
        query = query.filter(conversation__owner__guest__site_id=site_id)
    rows = [_Row(*values) for values in query[: row_cap + 1]]
    capped = len(rows) > row_cap
    rows = rows[:row_cap]
    covered_from = rows[-1].finished_at if capped else start

    total = _Answers()
    per_bucket = [_Answers() for _ in range(BUCKETS)]
    for row in rows:
        index = min(int((row.finished_at.timestamp() - start_s) // step), BUCKETS - 1)
        per_bucket[index].add(row)
        total.add(row)

    def covered_s(index: int) -> float:
        bucket_start = start_s + index * step
        return min(bucket_start + step, now.timestamp()) - max(
            bucket_start, covered_from.timestamp()
        )

    bucket_quantiles = [
        (Quantiles.of(b.ttft_ms), Quantiles.of(b.client_ttft_ms)) for b in per_bucket
    ]
    buckets = Buckets(
        start=[start_s + i * step for i in range(BUCKETS)],
        answers=[b.count for b in per_bucket],
        ttft_ms=_by_quantile([q for q, _ in bucket_quantiles]),
        client_ttft_ms=_by_quantile([q for _, q in bucket_quantiles]),
        faq_hit_rate=[b.faq_hit_rate() for b in per_bucket],
        prefix_cache_hit_rate=[b.prefix_cache_hit_rate() for b in per_bucket],
        answers_per_minute=[_rate(b.count * 60, covered_s(i)) for i, b in enumerate(per_bucket)],
        tokens_per_second=[
            _rate(b.completion_tokens, covered_s(i)) for i, b in enumerate(per_bucket)
        ],
    )
    window_s = now.timestamp() - covered_from.timestamp()
    summary = Summary(
        answers=total.count,
        complete=total.statuses[Message.Status.COMPLETE],
        stopped=total.statuses[Message.Status.STOPPED],
        failed=total.statuses[Message.Status.FAILED],
        faq_answers=total.faq,
        ttft_ms=Quantiles.of(total.ttft_ms),
        client_ttft_ms=Quantiles.of(total.client_ttft_ms),
        faq_hit_rate=total.faq_hit_rate(),
        prefix_cache_hit_rate=total.prefix_cache_hit_rate(),
        answers_per_minute=_rate(total.count * 60, window_s),
        tokens_per_second=_rate(total.completion_tokens, window_s),
        errors=sorted(total.error_codes.items(), key=lambda item: (-item[1], item[0])),
    )
    return LatencyReport(
        window=window,
        start=start,
        now=now,
        rows=len(rows),
        row_cap=row_cap,
        capped=capped,
        covered_from=covered_from,
        buckets=buckets,
        summary=summary,
        handoffs=handoff_summary(start=start, now=now, site_id=site_id),
    )


def _by_quantile(per_bucket: list[Quantiles]) -> dict[str, list[float | None]]:
    return {
        "p50": [q.p50 for q in per_bucket],
        "p95": [q.p95 for q in per_bucket],
        "p99": [q.p99 for q in per_bucket],
    }


def _quantiles_json(q: Quantiles) -> dict[str, Any]:
    return {"p50": q.p50, "p95": q.p95, "p99": q.p99, "count": q.count}


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _rate(amount: float, seconds: float) -> float | None:
    """Per-second rate over `seconds`; None for a bucket that has not started (or is empty
    time before the covered range), so the chart shows a gap instead of a false zero."""
    return round(amount / seconds, 3) if seconds > 0 else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
