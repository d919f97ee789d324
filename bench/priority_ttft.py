"""Interactive TTFT with and without a concurrent background load, in one run.

Run from the repository root (the default model must be prepared: `make prepare-model`):

    .venv/bin/python -m bench.priority_ttft [--rounds 3] [--per-block 8] [--phases ABC]
        [--outstanding 8] [--bg-max-tokens 96] [--ticket-sentences 6-12] [--gap 1.5]
        [--model-dir DIR]

The requirement it measures: interactive TTFT P95 with a concurrent background load at most
1.2x the TTFT P95 without it.

What happens, all in this process and inside one asyncio loop (vLLM binds to the loop that
first uses it):

1. The app is configured like the embedded default (`chatapp.settings.local`, in-memory
   channel layer) on a throwaway data dir, as in `bench/warmup_ttft.py`, with the FAQ off
   (`CHAT_FAQ_ENABLED=0`: every answer comes from the model) and the per-user rate limit
   raised (`CHAT_USER_RATE`: one bench user sends ~30 messages a minute, the default limit).
2. It loads the engine (`harness.loaded_engine`, scheduling policy "priority") and starts the
   app's `InferenceWorker` with `WorkerSettings.from_env()` (by default `max_active` 16,
   `max_background` 2). For phases C/D it starts a second worker on the same engine that
   listens on its own background channel with `max_background = max_active` (no cap) and on
   a request channel nobody sends to, so interactive requests still go to the first worker.
3. Interactive requests: customer-support questions sent as `chat.send` over `/ws/chat/`
   through the full ASGI app (`harness.chat_socket`: session auth, admission, the consumer,
   the answer relay), each in a NEW conversation; TTFT = `send` -> first `chat.delta`.
   Every request is preceded by `--gap` seconds (1.5 s; vLLM's CPU worker busy-polls for
   1 s after each step, bench/README.md "Pitfall") in every phase.
4. Background requests: batch-style ticket summaries, `GenerateRequest`s sent straight to a
   background channel (as the app's own prefix warm-up does: background work does not go
   through chat admission). Each has the same summarisation system prompt and a unique
   ticket of `--ticket-sentences` (6-12: ~230-270 new Gemma tokens, never in the prefix cache),
   `--bg-max-tokens` (96), temperature 0. `--outstanding` (8) are kept in flight: one task per
   slot sends one, reads its events to `done`, sends the next. One that no worker has accepted
   within 60 s (it can happen behind the cap of 2 on a slow machine) is withdrawn from the
   queue: it counts as `expired` and the slot sends the next.
5. Phases, as blocks of `--per-block` interactive requests, in rounds (the order rotates
   each round, so drift and noise hit every phase):
   * A: interactive alone (no background request in flight: checked per sample);
   * B: with the background load on `inference.background` at priority 10
     (`BACKGROUND_PRIORITY`): the shipped setup, the worker runs at most 2 at once;
   * C: the same load with the cap off and at priority 0 (background work indistinguishable
     from chat);
   * D (optional, `--phases ABCD`): cap off, priority 10 (vLLM's priority scheduling alone).
   A B/C/D block starts its load, waits until the first wave has produced its first token
   (past the initial burst of prefills), then runs its interactive requests; afterwards every
   background request still in flight is cancelled (`inference.cancel` on the worker's
   channel, as a closing browser does) and awaited, so the next block starts quiet.
6. Per interactive request it also records the worker's `timings`, the engine's unfinished
   requests just before the send and how many background prefills (accepted, no first token
   yet) overlapped the wait for the first token. The report: P50/P95 per phase, the ratios
   to A with a bootstrap 95 % interval for the P95 ratio, the background throughput each
   phase got, and `bench/results/priority_ttft-<timestamp>.{md,json}` (all raw data).

`--long-prefill-threshold N` is an EXPERIMENT, not the shipped engine: it sets vLLM's
`long_prefill_token_threshold` on the engine this process builds (a long prefill then takes at
most N tokens per step while other requests are scheduled). Engine sizes come from the usual
environment (`VLLM_MAX_NUM_BATCHED_TOKENS`, ...), the caps from `INFERENCE_MAX_BACKGROUND`
and `INFERENCE_MAX_ACTIVE`.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from bench import harness

if TYPE_CHECKING:
    from inference.engines.base import Engine
    from inference.settings import WorkerSettings

MODULE = "bench.priority_ttft"
# Every answer from the model; one user sends ~30 messages a minute (default limit 30).
APP_ENV = {"CHAT_FAQ_ENABLED": "0", "CHAT_USER_RATE": "100000"}

Phase = Literal["A", "B", "C", "D"]
PHASE_LABELS: dict[str, str] = {
    "A": "interactive alone",
    "B": "+ background, capped (2), priority 10 (shipped)",
    "C": "+ background, no cap, priority 0",
    "D": "+ background, no cap, priority 10",
}
# the uncapped worker of phases C/D: its own channels, so it never takes interactive requests
UNCAPPED_BACKGROUND_CHANNEL = "bench.priority.background-uncapped"
# a background request not accepted within this is withdrawn and counted `expired`
ACCEPT_WITHIN_S = 60.0
UNCAPPED_REQUEST_CHANNEL = "bench.priority.unused"

QUESTIONS = harness.SUPPORT_QUESTIONS
WARMUP_QUESTIONS: tuple[str, ...] = ("Hello, is anyone there?", "What are your opening hours?")

SUMMARY_SYSTEM = (
    "Below are customer-support tickets of ShopCo, an online store, each followed by the "
    "summary a support lead wrote for the weekly report: what the customer's problem is, what "
    "they want, what has been done and what the team should do next, in two or three "
    "sentences, without names or order numbers."
)
SUMMARY_REQUEST = "Summarise ticket {ticket_id} for the weekly report: {body}"
TICKET_SENTENCES: tuple[str, ...] = (
    "I ordered a {item} on {day} and the tracking page has not changed for {n} days.",
    "The parcel was marked as delivered but nobody in my building received anything.",
    "When I opened the box the {item} was scratched along one side and a corner was broken.",
    "I already sent two emails about this and the only answer was an automatic reply.",
    "Your website charged my card twice, once for {price} euros and once for {price2} euros.",
    "I would like a full refund to my credit card, not store credit or a voucher.",
    "If a replacement can be shipped by {day} I would accept that instead of a refund.",
    "The size guide said a medium would fit, but the {item} is at least two sizes too small.",
    "I tried to change the delivery address an hour after ordering but the button was grey.",
    "My discount code {code} was accepted in the basket and then missing from the invoice.",
    "The courier left a note saying they could not find the address, which has never happened.",
    "I have been a customer for {n} years and this is the first time something went wrong.",
    "The chat assistant told me to wait five business days, and it has now been {n}.",
    "Please tell me whether I need to print a return label or if the courier brings one.",
    "The invoice shows express shipping although I chose standard delivery at checkout.",
    "I also noticed that my account still shows an old phone number that I cannot edit.",
    "The {item} I received is a different colour from the one in the product photos.",
    "I need the {item} for a birthday on {day}, so please let me know quickly what you can do.",
    "My bank says the second payment of {price2} euros is only pending, but it is still there.",
    "I am happy to send photos of the damage and of the outer box if that helps.",
    "The return I sent back on {day} has not been refunded yet and I have the receipt.",
    "I do not want to be transferred again; please handle this in one reply if possible.",
)
ITEMS: tuple[str, ...] = (
    "ceramic table lamp",
    "winter jacket",
    "pair of running shoes",
    "coffee machine",
    "glass vase",
    "wool sweater",
    "desk chair",
    "set of bed sheets",
)
DAYS: tuple[str, ...] = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


def ticket(rng: random.Random, *, sentences: tuple[int, int]) -> str:
    """One ticket of `sentences` (low, high) random sentences, ~22 Gemma tokens each."""
    count = rng.randint(*sentences)
    chosen = [rng.choice(TICKET_SENTENCES) for _ in range(count)]
    values = {
        "item": rng.choice(ITEMS),
        "day": rng.choice(DAYS),
        "n": rng.randint(3, 12),
        "price": f"{rng.randint(20, 300)}.{rng.randint(0, 99):02d}",
        "price2": f"{rng.randint(20, 300)}.{rng.randint(0, 99):02d}",
        "code": f"SAVE{rng.randint(10, 99)}",
    }
    return " ".join(s.format(**values) for s in chosen)


# ---- the background load -----------------------------------------------------------------


@dataclass(kw_only=True)
class BgRecord:
    """One background request, times in seconds since the run's clock started."""

    phase: str
    block: int
    request_id: str
    sent_at: float
    accepted_at: float | None = None
    first_token_at: float | None = None
    finished_at: float | None = None
    delta_tokens: int = 0
    # done, cancelled (by the bench), expired (not accepted within 60 s, withdrawn),
    # error, lost (no end even after the cancel)
    outcome: str = "pending"
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    completion_tokens: int | None = None
    queue_wait_ms: float | None = None
    ttft_ms: float | None = None
    total_ms: float | None = None
    worker_channel: str | None = field(default=None, repr=False)

    def prefilling(self, *, start: float, end: float) -> bool:
        """Accepted, no first token yet, at some point within [start, end]."""
        if self.accepted_at is None or self.accepted_at > end:
            return False
        done = self.first_token_at if self.first_token_at is not None else self.finished_at
        return done is None or done > start


class BackgroundLoad:
    """Keeps `outstanding` background requests in flight on one channel until stopped."""

    def __init__(
        self,
        *,
        phase: str,
        block: int,
        channel: str,
        priority: int,
        outstanding: int,
        max_tokens: int,
        sentences: tuple[int, int],
        rng: random.Random,
        clock: Clock,
    ) -> None:
        self.sentences = sentences
        self.phase = phase
        self.block = block
        self.channel = channel
        self.priority = priority
        self.outstanding = outstanding
        self.max_tokens = max_tokens
        self.rng = rng
        self.clock = clock
        self.records: list[BgRecord] = []
        self.started_at = self.stopped_at = 0.0
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self._progress = asyncio.Event()

    @property
    def running(self) -> int:
        """Accepted by a worker and not ended."""
        return sum(1 for r in self.records if r.accepted_at is not None and r.finished_at is None)

    def prefilled(self) -> int:
        return sum(1 for r in self.records if r.first_token_at is not None or r.finished_at)

    def start(self) -> None:
        self.started_at = self.clock.now()
        self._tasks = [
            asyncio.create_task(self._slot(), name=f"bg-{self.phase}-{i}")
            for i in range(self.outstanding)
        ]

    async def one_request(self) -> BgRecord:
        """Send one request and read it to its end (warm-up)."""
        await self._one()
        return self.records[-1]

    async def wait_prefilled(self, count: int, *, timeout_s: float) -> None:
        """Until `count` requests have their first token (or ended)."""
        async with asyncio.timeout(timeout_s):
            while self.prefilled() < count:
                self._progress.clear()
                await self._progress.wait()

    async def stop(self, *, timeout_s: float = 180.0) -> int:
        """Stop sending, cancel what is in flight, wait for it; returns requests lost."""
        from channels.layers import get_channel_layer

        from inference.wire.protocol import CancelRequest

        self._stopping = True
        layer = get_channel_layer()
        for record in list(self.records):
            if record.finished_at is None and record.worker_channel is not None:
                await layer.send(
                    record.worker_channel,
                    CancelRequest(request_id=record.request_id).to_channel(),
                )
        # Not yet accepted ones cancel themselves on `inference.accepted`.
        _, pending = await asyncio.wait(self._tasks, timeout=timeout_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        lost = 0
        for record in self.records:
            if record.finished_at is None:
                record.outcome = "lost"
                lost += 1
        self.stopped_at = self.clock.now()
        return lost

    async def _slot(self) -> None:
        while not self._stopping:
            await self._one()

    async def _one(self) -> None:
        from channels.layers import get_channel_layer
        from django.conf import settings

        from inference.wire.protocol import (
            Accepted,
            CancelRequest,
            ChatTurn,
            Delta,
            Done,
            Error,
            GenerateRequest,
            SamplingOptions,
            worker_event_adapter,
        )
        from inference.wire.request_queue import request_queue

        layer = get_channel_layer()
        reply = await layer.new_channel(prefix="bench-bg")
        ticket_id = f"T-{self.rng.randrange(16**8):08X}"
        request = GenerateRequest(
            request_id=f"bg-{self.phase}-{uuid.uuid4()}",
            reply_channel=reply,
            system=SUMMARY_SYSTEM,
            messages=[
                ChatTurn(
                    role="user",
                    content=SUMMARY_REQUEST.format(
                        ticket_id=ticket_id, body=ticket(self.rng, sentences=self.sentences)
                    ),
                )
            ],
            sampling=SamplingOptions(max_tokens=self.max_tokens, temperature=0.0),
            priority=self.priority,
            submitted_at=time.time(),
        )
        record = BgRecord(
            phase=self.phase,
            block=self.block,
            request_id=request.request_id,
            sent_at=self.clock.now(),
        )
        self.records.append(record)
        queue = request_queue(redis_url=settings.REDIS_URL)
        entry_id = await queue.put(self.channel, request.to_channel())
        # A request still queued after ACCEPT_WITHIN_S is withdrawn (counted `expired`), as the
        # product's own requesters give up on a queue that does not move.
        accept_by = time.monotonic() + ACCEPT_WITHIN_S
        try:
            while True:
                try:
                    async with asyncio.timeout(
                        None if record.accepted_at is not None else accept_by - time.monotonic()
                    ):
                        raw = await layer.receive(reply)
                except TimeoutError:
                    await queue.withdraw(self.channel, entry_id)
                    record.finished_at = self.clock.now()
                    record.outcome = "expired"
                    return
                event = worker_event_adapter.validate_python(raw)
                now = self.clock.now()
                if isinstance(event, Accepted):
                    record.accepted_at = now
                    record.worker_channel = event.worker_channel
                    if self._stopping:
                        await layer.send(
                            event.worker_channel,
                            CancelRequest(request_id=request.request_id).to_channel(),
                        )
                elif isinstance(event, Delta):
                    if record.first_token_at is None:
                        record.first_token_at = now
                        self._progress.set()
                    record.delta_tokens += event.tokens
                elif isinstance(event, Done):
                    record.finished_at = now
                    record.outcome = "cancelled" if event.finish_reason == "abort" else "done"
                    record.finish_reason = event.finish_reason
                    record.prompt_tokens = event.prompt_tokens
                    record.cached_prompt_tokens = event.cached_prompt_tokens
                    record.completion_tokens = event.completion_tokens
                    record.queue_wait_ms = event.queue_wait_ms
                    record.ttft_ms = event.ttft_ms
                    record.total_ms = event.total_ms
                    return
                elif isinstance(event, Error):
                    record.finished_at = now
                    record.outcome = f"error: {event.code}: {event.message}"
                    return
                # heartbeats: nothing to do
        finally:
            self._progress.set()


# ---- interactive requests ----------------------------------------------------------------


class Clock:
    """Seconds since the run started (`time.perf_counter()`), one clock for every record."""

    def __init__(self) -> None:
        self.origin = time.perf_counter()

    def now(self) -> float:
        return time.perf_counter() - self.origin


@dataclass(kw_only=True)
class SampleKey:
    index: int
    round: int
    block: int
    phase: str
    question: str
    sent_at: float  # clock seconds
    engine_unfinished_at_send: int
    bg_running_at_send: int  # accepted by a worker and not ended
    bg_prefills_overlapping: int  # background prefills in flight while waiting for the token


@dataclass(kw_only=True)
class Sample(harness.Measures, SampleKey):
    """A probe's key, then what it measured (the JSON's key order)."""

    measured: bool = True

    @property
    def outside_worker_ms(self) -> float | None:
        """Client TTFT minus the worker's `ttft_ms`: the consumer, the channel layer, the
        worker's queue and the way back."""
        if self.ttft_s is None or self.server_ttft_ms is None:
            return None
        return self.ttft_s * 1000.0 - self.server_ttft_ms

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"outside_worker_ms": self.outside_worker_ms}


@dataclass(kw_only=True)
class Block:
    round: int
    block: int
    phase: str
    started_at: float
    interactive_from: float = 0.0
    ended_at: float = 0.0
    bg_lost: int = 0


async def interactive(
    *,
    ws: Any,
    engine: Engine,
    question: str,
    gap_s: float,
    clock: Clock,
    load: BackgroundLoad | None,
) -> tuple[harness.Reply, float, int, int]:
    """Idle `gap_s`, then one `chat.send`; returns the reply, the send time, the engine's
    unfinished requests and the background requests running just before the send."""
    await asyncio.sleep(gap_s)
    unfinished = engine.stats().unfinished_requests
    bg_running = load.running if load is not None else 0
    frame = harness.chat_send(question)
    sent_at = clock.now()
    reply = await harness.send_and_wait(ws=ws, frame=frame)
    return reply, sent_at, unfinished, bg_running


# ---- statistics and report ---------------------------------------------------------------


def ttfts_ms(samples: Sequence[Sample]) -> list[float]:
    return harness.values_of(samples, attr="ttft_s", scale=1000.0)


def bootstrap_ratio(
    num: Sequence[float], den: Sequence[float], *, q: float, rng: random.Random, n: int = 2000
) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of percentile(num, q) / percentile(den, q)."""
    if not num or not den:
        return float("nan"), float("nan")
    ratios = []
    for _ in range(n):
        a = [rng.choice(num) for _ in num]
        b = [rng.choice(den) for _ in den]
        pb = harness.percentile(b, q=q)
        if pb > 0:
            ratios.append(harness.percentile(a, q=q) / pb)
    return harness.percentile(ratios, q=0.025), harness.percentile(ratios, q=0.975)


def phase_rows(
    samples: Sequence[Sample],
    records: Sequence[BgRecord],
    blocks: Sequence[Block],
    phases: str,
    *,
    seed: int,
) -> tuple[str, dict[str, Any]]:
    rng = random.Random(seed)  # noqa: S311 - resampling, not security
    base = ttfts_ms([s for s in samples if s.phase == "A"])
    a50, a95 = harness.median(base), harness.percentile(base, q=0.95)
    lines = [
        "| phase | n | TTFT P50 (ms) | TTFT P95 (ms) | P50 / A | P95 / A | P95 / A, 95 % CI "
        "| worker `ttft_ms` P50 / P95 | outside the worker P50 / P95 | bg running at send (median) "
        "| bg done / min | bg tokens / s |",
        "|---|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|",
    ]
    summary: dict[str, Any] = {}
    for phase in phases:
        mine = [s for s in samples if s.phase == phase]
        ttft = ttfts_ms(mine)
        p50, p95 = harness.median(ttft), harness.percentile(ttft, q=0.95)
        server = harness.values_of(mine, attr="server_ttft_ms")
        outside = harness.values_of(mine, attr="outside_worker_ms")
        running = [float(s.bg_running_at_send) for s in mine]
        bg = [r for r in records if r.phase == phase]
        # the load's own time: from starting it to stopping it, summed over the blocks
        load_s = sum(b.ended_at - b.interactive_from for b in blocks if b.phase == phase)
        done = [r for r in bg if r.outcome == "done"]
        tokens = sum(r.delta_tokens for r in bg if r.first_token_at is not None)
        done_in = sum(1 for r in done if r.finished_at is not None and _in_interactive(r, blocks))
        tokens_in = sum(_tokens_in_interactive(r, blocks) for r in bg)
        if phase == "A":
            ratio50 = ratio95 = "1.00"
            ci = "-"
        else:
            ratio50 = f"{p50 / a50:.2f}" if a50 else "-"
            ratio95 = f"{p95 / a95:.2f}" if a95 else "-"
            low, high = bootstrap_ratio(ttft, base, q=0.95, rng=rng)
            ci = f"{low:.2f} - {high:.2f}"
        bg_cells = (
            ["-", "-"]
            if phase == "A"
            else [
                f"{done_in / load_s * 60:.1f}" if load_s else "-",
                f"{tokens_in / load_s:.1f}" if load_s else "-",
            ]
        )
        lines.append(
            "| "
            + " | ".join(
                [
                    f"{phase}: {PHASE_LABELS[phase]}",
                    str(len(ttft)),
                    f"{p50:.1f}",
                    f"{p95:.1f}",
                    ratio50,
                    ratio95,
                    ci,
                    f"{harness.median(server):.1f} / {harness.percentile(server, q=0.95):.1f}",
                    f"{harness.median(outside):.1f} / {harness.percentile(outside, q=0.95):.1f}",
                    f"{harness.median(running):.0f}",
                    *bg_cells,
                ]
            )
            + " |"
        )
        summary[phase] = {
            "n": len(ttft),
            "ttft_p50_ms": p50,
            "ttft_p95_ms": p95,
            "ttft_max_ms": max(ttft) if ttft else None,
            "p50_over_a": p50 / a50 if a50 else None,
            "p95_over_a": p95 / a95 if a95 else None,
            "p95_over_a_ci95": None if phase == "A" else ci,
            "bg_requests": len(bg),
            "bg_done": len(done),
            "bg_tokens": tokens,
            "bg_done_per_min_interactive": done_in / load_s * 60 if load_s else None,
            "bg_tokens_per_s_interactive": tokens_in / load_s if load_s else None,
        }
    return "\n".join(lines), summary


def _interactive_window(record: BgRecord, blocks: Sequence[Block]) -> Block | None:
    for block in blocks:
        if block.phase == record.phase and block.block == record.block:
            return block
    return None


def _in_interactive(record: BgRecord, blocks: Sequence[Block]) -> bool:
    block = _interactive_window(record, blocks)
    return (
        block is not None
        and record.finished_at is not None
        and block.interactive_from <= record.finished_at <= block.ended_at
    )


def _tokens_in_interactive(record: BgRecord, blocks: Sequence[Block]) -> float:
    """Tokens of `record` generated inside its block's interactive window, spread evenly
    between its first token and its end (an estimate: deltas are not timestamped one by one)."""
    block = _interactive_window(record, blocks)
    if block is None or record.first_token_at is None or record.finished_at is None:
        return 0.0
    start, end = record.first_token_at, record.finished_at
    if end <= start:
        return float(record.delta_tokens) if block.interactive_from <= end <= block.ended_at else 0
    overlap = min(end, block.ended_at) - max(start, block.interactive_from)
    return max(0.0, overlap) / (end - start) * record.delta_tokens


def build_extras(
    samples: Sequence[Sample], records: Sequence[BgRecord], blocks: Sequence[Block], phases: str
) -> str:
    lines = []
    a_busy = [s.index for s in samples if s.phase == "A" and s.engine_unfinished_at_send]
    lines.append(
        "- A samples sent while the engine still had a request (should be none): "
        f"{a_busy or 'none'}"
    )
    for phase in phases:
        if phase == "A":
            continue
        mine = [s for s in samples if s.phase == phase]
        bg = [r for r in records if r.phase == phase]
        done = [r for r in bg if r.outcome == "done"]
        outcomes: dict[str, int] = {}
        for r in bg:
            key = r.outcome if not r.outcome.startswith("error") else "error"
            outcomes[key] = outcomes.get(key, 0) + 1
        prompt = harness.values_of(done, attr="prompt_tokens")
        cached = harness.values_of(done, attr="cached_prompt_tokens")
        completion = harness.values_of(done, attr="completion_tokens")
        bg_ttft = harness.values_of(done, attr="ttft_ms")
        bg_total = harness.values_of(done, attr="total_ms")
        lines.append(
            f"- {phase}: background requests {len(bg)} ({outcomes}); completed ones: prompt "
            f"{harness.median(prompt):.0f} tokens (cached {harness.median(cached):.0f}), "
            f"completion {harness.median(completion):.0f}, worker ttft "
            f"{harness.median(bg_ttft):.0f} ms, total {harness.median(bg_total):.0f} ms "
            "(medians)"
        )
        overlapped = [s for s in mine if s.bg_prefills_overlapping]
        clear = [s for s in mine if not s.bg_prefills_overlapping]
        lines.append(
            f"  - interactive TTFT while a background prefill was in flight: "
            f"{len(overlapped)}/{len(mine)} samples, P50 "
            f"{harness.median(ttfts_ms(overlapped)):.1f} ms, max "
            f"{max(ttfts_ms(overlapped), default=float('nan')):.1f} ms; without: "
            f"P50 {harness.median(ttfts_ms(clear)):.1f} ms, P95 "
            f"{harness.percentile(ttfts_ms(clear), q=0.95):.1f} ms"
        )
    lost = sum(b.bg_lost for b in blocks)
    lines.append(f"- background requests not ended after the cancel (lost): {lost}")
    no_delta = [s.index for s in samples if s.ttft_s is None]
    lines.append(f"- interactive answers without any `chat.delta`: {no_delta or 'none'}")
    return "\n".join(lines)


# ---- main --------------------------------------------------------------------------------


def cap_long_prefills(tokens: int) -> None:
    """EXPERIMENT, not the shipped engine: vLLM's `long_prefill_token_threshold` for the
    engine this process builds (a prefill gets at most `tokens` per step while another request
    is scheduled), by wrapping `AsyncLLM.from_engine_args`."""
    from vllm.v1.engine.async_llm import AsyncLLM

    original = AsyncLLM.from_engine_args

    def from_engine_args(engine_args: Any, *rest: Any, **kwargs: Any) -> Any:
        engine_args.long_prefill_token_threshold = tokens
        return original(engine_args, *rest, **kwargs)

    AsyncLLM.from_engine_args = from_engine_args


def schedule(*, phases: str, rounds: int) -> list[tuple[int, str]]:
    """(round, phase) blocks; the phase order rotates by one every round."""
    out = []
    for r in range(rounds):
        k = r % len(phases)
        for phase in phases[k:] + phases[:k]:
            out.append((r, phase))
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from chatapp.answers.runtime import answer_runtime_close
    from inference.settings import EngineSettings, WorkerSettings
    from inference.wire.protocol import BACKGROUND_PRIORITY, INTERACTIVE_PRIORITY

    settings: WorkerSettings = WorkerSettings.from_env()
    uncapped = settings.model_copy(
        update={
            "request_channel": UNCAPPED_REQUEST_CHANNEL,
            "background_channel": UNCAPPED_BACKGROUND_CHANNEL,
            "max_background": settings.max_active,
        }
    )
    phase_setup: dict[str, tuple[str, int, int]] = {  # channel, priority, running at most
        "B": (settings.background_channel, BACKGROUND_PRIORITY, settings.max_background),
        "C": (UNCAPPED_BACKGROUND_CHANNEL, INTERACTIVE_PRIORITY, settings.max_active),
        "D": (UNCAPPED_BACKGROUND_CHANNEL, BACKGROUND_PRIORITY, settings.max_active),
    }
    rng = random.Random(args.seed)  # noqa: S311 - varied tickets, not security
    clock = Clock()
    samples: list[Sample] = []
    records: list[BgRecord] = []
    blocks: list[Block] = []
    plan = schedule(phases=args.phases, rounds=args.rounds)
    if args.long_prefill_threshold:
        cap_long_prefills(args.long_prefill_threshold)
    async with harness.loaded_engine(worker_settings=settings) as loaded:
        assert loaded.engine is not None
        engine = loaded.engine
        await loaded.start_worker(settings=settings)
        if any(p in args.phases for p in "CD"):
            await loaded.start_worker(settings=uncapped)
        async with harness.chat_socket(username="priority-bench") as ws:
            # unmeasured: the interactive path, then one background request on each channel
            for question in WARMUP_QUESTIONS:
                await interactive(
                    ws=ws, engine=engine, question=question, gap_s=args.gap, clock=clock, load=None
                )
            for phase in "B" + ("C" if any(p in args.phases for p in "CD") else ""):
                channel, priority, _ = phase_setup[phase]
                warm = BackgroundLoad(
                    phase=f"warmup-{phase}",
                    block=-1,
                    channel=channel,
                    priority=priority,
                    outstanding=1,
                    max_tokens=args.bg_max_tokens,
                    sentences=args.sentences,
                    rng=rng,
                    clock=clock,
                )
                record = await asyncio.wait_for(warm.one_request(), 300)
                print(
                    f"[warm-up] background on {channel}: {record.outcome}, prompt "
                    f"{record.prompt_tokens} tokens, completion {record.completion_tokens}, worker "
                    f"ttft {record.ttft_ms} ms, total {record.total_ms} ms",
                    flush=True,
                )

            index = 0
            for block_no, (round_no, phase) in enumerate(plan):
                block = Block(round=round_no, block=block_no, phase=phase, started_at=clock.now())
                load: BackgroundLoad | None = None
                if phase != "A":
                    channel, priority, running = phase_setup[phase]
                    load = BackgroundLoad(
                        phase=phase,
                        block=block_no,
                        channel=channel,
                        priority=priority,
                        outstanding=args.outstanding,
                        max_tokens=args.bg_max_tokens,
                        sentences=args.sentences,
                        rng=rng,
                        clock=clock,
                    )
                    load.start()
                    await load.wait_prefilled(min(running, args.outstanding), timeout_s=300)
                block.interactive_from = clock.now()
                for i in range(args.per_block):
                    question = QUESTIONS[(round_no * args.per_block + i) % len(QUESTIONS)]
                    reply, sent_at, unfinished, running = await interactive(
                        ws=ws,
                        engine=engine,
                        question=question,
                        gap_s=args.gap,
                        clock=clock,
                        load=load,
                    )
                    end = sent_at + (reply.ttft_s if reply.ttft_s is not None else reply.total_s)
                    overlapping = (
                        sum(1 for r in load.records if r.prefilling(start=sent_at, end=end))
                        if load is not None
                        else 0
                    )
                    sample = Sample(
                        index=index,
                        round=round_no,
                        block=block_no,
                        phase=phase,
                        question=question,
                        sent_at=sent_at,
                        engine_unfinished_at_send=unfinished,
                        bg_running_at_send=running,
                        bg_prefills_overlapping=overlapping,
                        **reply.fields(),
                    )
                    samples.append(sample)
                    index += 1
                    ttft = "-" if reply.ttft_s is None else f"{reply.ttft_s * 1000:7.1f}"
                    print(
                        f"[r{round_no} {phase} {i + 1}/{args.per_block}] TTFT {ttft} ms "
                        f"(worker {reply.server_ttft_ms}, queue {reply.queue_wait_ms}) | "
                        f"bg running {running}, prefills overlapping {overlapping} | "
                        f"engine unfinished {unfinished} | {reply.answer[:50]!r}",
                        flush=True,
                    )
                block.ended_at = clock.now()
                print(
                    f"[r{round_no} {phase}] block {block.ended_at - block.started_at:.1f} s "
                    f"(clock {block.ended_at:.0f} s)",
                    flush=True,
                )
                if load is not None:
                    block.bg_lost = await load.stop()
                    records.extend(load.records)
                blocks.append(block)
            await answer_runtime_close()
    return {
        "load_s": loaded.load_s,
        "samples": samples,
        "records": records,
        "blocks": blocks,
        "settings": {
            "main": settings.model_dump(mode="json"),
            "uncapped": uncapped.model_dump(mode="json"),
        },
        "engine_settings": EngineSettings.from_env().model_dump(mode="json"),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of one block per phase (3)")
    parser.add_argument(
        "--per-block", type=int, default=8, help="interactive requests per block (8)"
    )
    parser.add_argument(
        "--phases",
        default="ABC",
        help="A (alone), B (background, shipped), C (no cap, priority 0), D (no cap, "
        "priority 10); default ABC",
    )
    parser.add_argument(
        "--outstanding", type=int, default=8, help="background requests kept in flight (8)"
    )
    parser.add_argument(
        "--bg-max-tokens", type=int, default=96, help="max_tokens of a background request"
    )
    parser.add_argument(
        "--ticket-sentences",
        default="6-12",
        help="sentences per background ticket, LOW-HIGH (6-12: ~230-270 new Gemma tokens)",
    )
    parser.add_argument("--seed", type=int, default=1, help="tickets and the bootstrap")
    parser.add_argument(
        "--long-prefill-threshold",
        type=int,
        default=0,
        help="EXPERIMENT (not the shipped engine): vLLM long_prefill_token_threshold, i.e. "
        "prefill chunks of at most N tokens while other requests are scheduled; 0: off",
    )
    harness.add_engine_args(parser)
    args = parser.parse_args(argv)
    phases = "".join(dict.fromkeys(args.phases.upper()))
    if not phases or "A" not in phases or set(phases) - set("ABCD"):
        parser.error("--phases: letters of ABCD, including A")
    args.phases = phases
    try:
        low, high = (int(x) for x in args.ticket_sentences.split("-"))
    except ValueError:
        parser.error("--ticket-sentences: LOW-HIGH, e.g. 6-12")
    if not 1 <= low <= high:
        parser.error("--ticket-sentences: 1 <= LOW <= HIGH")
    args.sentences = (low, high)
    if args.long_prefill_threshold < 0:
        parser.error("--long-prefill-threshold must be >= 0")
    if args.rounds < 1 or args.per_block < 1 or args.outstanding < 1 or args.bg_max_tokens < 1:
        parser.error("--rounds, --per-block, --outstanding and --bg-max-tokens must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    model_dir: Path = args.model_dir.resolve()
    result = harness.run_in_fresh_app(run, args, prefix="priority_ttft-", extra_env=APP_ENV)

    samples: list[Sample] = result["samples"]
    records: list[BgRecord] = result["records"]
    blocks: list[Block] = result["blocks"]
    main_settings = result["settings"]["main"]
    engine_settings: dict[str, Any] = result["engine_settings"]
    stamp = harness.timestamp()
    header = (
        f"priority_ttft {stamp}: {args.rounds} rounds x phases {args.phases} (order rotating), "
        f"{args.per_block} interactive requests per block over `/ws/chat/`, "
        f"{args.gap:g} s before every request; background: {args.outstanding} ticket "
        f"summaries in flight (max_tokens {args.bg_max_tokens}); worker max_active "
        f"{main_settings['max_active']}, max_background {main_settings['max_background']}\n\n"
        f"- CPU: {harness.machine()}\n"
        f"- model: {model_dir} (loaded in {result['load_s']:.1f} s); engine: "
        + ", ".join(f"{k} {v}" for k, v in engine_settings.items() if k.startswith("max_"))
        + (
            f"; EXPERIMENT: long_prefill_token_threshold {args.long_prefill_threshold}"
            if args.long_prefill_threshold
            else ""
        )
        + "\n"
        f"- command: `{harness.command_line(module=MODULE)}`\n"
        "- TTFT = `chat.send` -> first `chat.delta` on the client; P95 by linear "
        "interpolation; CI: 2000 bootstrap resamples of both phases"
    )
    table, summary = phase_rows(samples, records, blocks, args.phases, seed=args.seed)
    b95 = summary.get("B", {}).get("p95_over_a")
    verdict = (
        f"- goal (B P95 / A P95 <= 1.2): {'met' if b95 <= 1.2 else 'missed'} ({b95:.2f})"
        if isinstance(b95, float)
        else "- goal: phase B not run"
    )
    markdown = "\n\n".join(
        [header, table, verdict + "\n" + build_extras(samples, records, blocks, args.phases)]
    )
    print("\n" + markdown, flush=True)
    report = harness.report_base(stamp=stamp, model_dir=model_dir, module=MODULE) | {
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "engine_load_s": result["load_s"],
        "worker_settings": result["settings"],
        "engine_settings": engine_settings,
        "summary": summary,
        "blocks": [asdict(b) for b in blocks],
        "samples": [s.to_json() for s in samples],
        "background": [asdict(r) for r in records],
    }
    harness.write_results(name="priority_ttft", stamp=stamp, markdown=markdown, report=report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
