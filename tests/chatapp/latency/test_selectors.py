"""The latency report on stored answers: buckets, percentiles, hit rates, throughput, errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chatapp.conversations.models import Message
from chatapp.errors import ApplicationError
from chatapp.latency.selectors import BUCKETS, WINDOWS, latency_report, window_get
from tests.chatapp.latency.factories import answer_create

pytestmark = pytest.mark.django_db

# 30 s into a minute: with the 1 h window (1 min buckets) the last bucket is half over.
NOW = datetime(2026, 11, 29, 12, 0, 30, tzinfo=UTC)
HOUR = WINDOWS["1h"]
FIRST_BUCKET = datetime(2026, 11, 29, 11, 1, tzinfo=UTC)  # 60 buckets end at 12:01


def bucket_index(at: datetime) -> int:
    return int((at - FIRST_BUCKET).total_seconds() // 60)


def test_windows_have_60_buckets_of_a_readable_size() -> None:
    assert {key: w.bucket_label for key, w in WINDOWS.items()} == {
        "1h": "1 min",
        "6h": "6 min",
        "24h": "24 min",
        "7d": "2 h 48 min",
    }
    assert all(w.bucket_seconds * BUCKETS == w.seconds for w in WINDOWS.values())


def test_an_unknown_window_is_refused_with_the_choices() -> None:
    with pytest.raises(ApplicationError, match=r"Unknown window '2h': choose one of 1h, 6h"):
        window_get(key="2h")


def test_an_empty_window_has_no_percentiles_and_zero_throughput() -> None:
    report = latency_report(window=HOUR, now=NOW)

    assert report.start == FIRST_BUCKET
    assert report.rows == 0
    assert not report.capped
    assert report.summary.answers == 0
    assert report.summary.ttft_ms.p95 is None
    assert report.summary.faq_hit_rate is None
    assert report.summary.errors == []
    assert report.buckets.ttft_ms["p50"] == [None] * BUCKETS
    # Time passed with no answers is a measured zero, not a gap.
    assert report.buckets.answers_per_minute == [0.0] * BUCKETS


def test_ttft_percentiles_per_bucket_and_for_the_window() -> None:
    busy_minute = datetime(2026, 11, 29, 11, 30, 5, tzinfo=UTC)
    for i, ttft in enumerate([100, 20, 30, 40, 50, 60, 70, 80, 90, 10]):
        answer_create(
            finished_at=busy_minute + timedelta(seconds=i),
            ttft_ms=float(ttft),
            client_ttft_ms=float(ttft + 15),
        )
    last_minute = datetime(2026, 11, 29, 12, 0, 10, tzinfo=UTC)
    answer_create(finished_at=last_minute, ttft_ms=5.0)  # no browser TTFT reported
    answer_create(finished_at=last_minute, ttft_ms=7.0)

    report = latency_report(window=HOUR, now=NOW)

    busy = bucket_index(busy_minute)
    assert report.buckets.start[busy] == int(busy_minute.replace(second=0).timestamp())
    assert report.buckets.answers[busy] == 10
    assert report.buckets.ttft_ms["p50"][busy] == 50.0
    assert report.buckets.ttft_ms["p95"][busy] == 100.0
    assert report.buckets.ttft_ms["p99"][busy] == 100.0
    assert report.buckets.client_ttft_ms["p50"][busy] == 65.0
    assert report.buckets.ttft_ms["p50"][BUCKETS - 1] == 5.0
    assert report.buckets.client_ttft_ms["p50"][BUCKETS - 1] is None
    assert report.buckets.ttft_ms["p50"][busy - 1] is None  # a quiet minute is a gap
    # Whole window: 12 server values, 10 browser values.
    assert report.summary.ttft_ms.count == 12
    assert (report.summary.ttft_ms.p50, report.summary.ttft_ms.p95) == (40.0, 100.0)
    assert report.summary.client_ttft_ms.count == 10
    assert report.summary.client_ttft_ms.p99 == 115.0


def test_answers_outside_the_window_or_unfinished_are_not_counted() -> None:
    answer_create(finished_at=FIRST_BUCKET - timedelta(seconds=1), ttft_ms=999.0)  # too old
    answer_create(finished_at=NOW + timedelta(seconds=1), ttft_ms=999.0)  # after now
    answer_create(finished_at=NOW, status=Message.Status.STREAMING, ttft_ms=999.0)
    answer_create(finished_at=NOW, role=Message.Role.USER, ttft_ms=999.0)
    answer_create(finished_at=FIRST_BUCKET, ttft_ms=1.0)  # the window's first instant

    report = latency_report(window=HOUR, now=NOW)

    assert report.summary.answers == 1
    assert report.summary.ttft_ms.p99 == 1.0
    assert report.buckets.answers[0] == 1


def test_faq_and_prefix_cache_hit_rates() -> None:
    at = datetime(2026, 11, 29, 11, 45, 0, tzinfo=UTC)
    answer_create(finished_at=at, source="faq", prompt_tokens=0, cached_prompt_tokens=0)
    answer_create(finished_at=at, prompt_tokens=100, cached_prompt_tokens=80)
    answer_create(finished_at=at, prompt_tokens=100, cached_prompt_tokens=0)
    answer_create(
        finished_at=at, status=Message.Status.STOPPED, prompt_tokens=200, cached_prompt_tokens=120
    )
    # A failed answer counts as an answer but not in the FAQ rate's denominator (no text).
    answer_create(finished_at=at, status=Message.Status.FAILED, error_code="worker_lost")
    # Another bucket: all from the FAQ.
    later = at + timedelta(minutes=5)
    answer_create(finished_at=later, source="faq")

    report = latency_report(window=HOUR, now=NOW)

    here, there = bucket_index(at), bucket_index(later)
    assert report.buckets.faq_hit_rate[here] == 0.25  # 1 of 4 answered
    assert report.buckets.prefix_cache_hit_rate[here] == 0.5  # 200 of 400 prompt tokens
    assert report.buckets.faq_hit_rate[there] == 1.0
    assert report.buckets.prefix_cache_hit_rate[there] is None  # no model answer there
    assert report.summary.faq_hit_rate == 0.4  # 2 of 5 answered
    assert report.summary.faq_answers == 2
    assert report.summary.prefix_cache_hit_rate == 0.5
    assert (report.summary.complete, report.summary.stopped, report.summary.failed) == (4, 1, 1)


def test_throughput_is_per_covered_time_and_the_last_bucket_is_partial() -> None:
    full = datetime(2026, 11, 29, 11, 50, 0, tzinfo=UTC)
    answer_create(finished_at=full, completion_tokens=60)
    answer_create(finished_at=full + timedelta(seconds=30), completion_tokens=120)
    answer_create(finished_at=NOW - timedelta(seconds=5), completion_tokens=30)

    report = latency_report(window=HOUR, now=NOW)

    assert report.buckets.answers_per_minute[bucket_index(full)] == 2.0
    assert report.buckets.tokens_per_second[bucket_index(full)] == 3.0  # 180 tokens / 60 s
    # The last bucket has run 30 s: 1 answer in 30 s is 2 a minute, 30 tokens is 1/s.
    assert report.buckets.answers_per_minute[BUCKETS - 1] == 2.0
    assert report.buckets.tokens_per_second[BUCKETS - 1] == 1.0
    window_s = (NOW - FIRST_BUCKET).total_seconds()  # 59.5 min
    assert report.summary.answers_per_minute == round(3 * 60 / window_s, 3)
    assert report.summary.tokens_per_second == round(210 / window_s, 3)


def test_errors_are_counted_by_code_most_frequent_first() -> None:
    at = datetime(2026, 11, 29, 11, 10, tzinfo=UTC)
    for code in ("worker_lost", "interrupted", "worker_lost", "no_worker", "worker_lost"):
        answer_create(finished_at=at, status=Message.Status.FAILED, error_code=code)
    answer_create(finished_at=at)

    report = latency_report(window=HOUR, now=NOW)

    assert report.summary.errors == [("worker_lost", 3), ("interrupted", 1), ("no_worker", 1)]


def test_buckets_stay_put_between_refreshes() -> None:
    a = latency_report(window=WINDOWS["6h"], now=NOW)
    b = latency_report(window=WINDOWS["6h"], now=NOW + timedelta(seconds=15))
    assert a.buckets.start == b.buckets.start
    assert a.buckets.start[1] - a.buckets.start[0] == 360


def test_more_rows_than_the_cap_reads_the_newest_and_says_so() -> None:
    times = [datetime(2026, 11, 29, 11, m, tzinfo=UTC) for m in (5, 20, 40, 50, 55)]
    for minute, at in enumerate(times):
        answer_create(finished_at=at, ttft_ms=float(minute))

    report = latency_report(window=HOUR, now=NOW, row_cap=3)

    assert report.capped
    assert report.rows == 3
    assert report.covered_from == times[2]
    assert report.summary.answers == 3
    assert report.summary.ttft_ms.p50 == 3.0  # of 2, 3, 4: the two oldest were not read
    # Before the covered range nothing was read: a gap, not a zero.
    assert report.buckets.answers_per_minute[bucket_index(times[0])] is None
    assert report.buckets.answers_per_minute[bucket_index(times[3])] == 1.0


def test_the_json_has_one_value_per_bucket_in_every_series() -> None:
    answer_create(finished_at=NOW - timedelta(minutes=3), ttft_ms=12.0, completion_tokens=5)

    data = latency_report(window=HOUR, now=NOW).as_json()

    assert data["window"] == "1h"
    assert data["bucket_seconds"] == 60
    assert data["capped"] is False
    series = data["buckets"]
    flat = [series[k] for k in series if isinstance(series[k], list)]
    flat += [v for k in ("ttft_ms", "client_ttft_ms") for v in series[k].values()]
    assert len(flat) == 12
    assert all(len(values) == BUCKETS for values in flat)
    assert data["summary"]["ttft_ms"] == {"p50": 12.0, "p95": 12.0, "p99": 12.0, "count": 1}
    assert data["summary"]["errors"] == []
