"""TTFT of the first message after publishing a template, with vs without the cache warm-up.

Run from the repository root (the default model must be prepared: `make prepare-model`):

    .venv/bin/python -m bench.warmup_ttft [--trials 12] [--gap 1.5] [--model-dir DIR]

What happens, all in this process and inside one asyncio loop (vLLM binds to the loop that
first uses it):

1. The app is configured like the embedded default (`chatapp.settings.local`, no `REDIS_URL`:
   in-memory channel layer, eager Celery) on a throwaway data dir (`CHAT_DATA_DIR` = a temp
   dir, fresh SQLite, `migrate`), with `MODEL` = the model folder (`--model-dir`) and the
   vLLM/torch compile caches of the real data dir (`VLLM_CACHE_ROOT` etc.), so nothing is
   recompiled.
2. It loads the engine (`inference.runtime.build_engine`), starts an `InferenceWorker` on the
   channel layer, logs a user in (`django.test.Client.force_login`) and opens `/ws/chat/`
   through the full ASGI app (`channels.testing.WebsocketCommunicator`: origin check,
   session auth, routing, the real consumer).
3. Trials alternate warm, cold, warm, cold, ... Each trial creates a NEW template whose system
   prompt is a ~1040-token support policy (counted in Gemma's tokenizer, where this was first
   measured) that is unique from its first sentence on (a random policy id), so no earlier
   trial's KV blocks can help, and publishes it with
   `chatapp.prompts.services.template_publish` (via `sync_to_async`):
   * warm: as shipped; eager Celery runs `warm_template_version` inside the publish, i.e. a
     one-token, low-priority request with the system prefix through the worker, and the
     publish returns when it is done;
   * cold: `chatapp.prompts.tasks.warm_template_version.delay` is replaced by a no-op for
     that publish, so the prefix is not in vLLM's cache.
   Then the first user message of the template (template + variables, as the browser sends
   it) goes over the socket. TTFT = `send` -> the first `chat.delta` frame; `chat.done` gives
   the prompt and cached prompt tokens and the worker's own timings.
4. Every request is preceded by `--gap` seconds of idle (1.5 s): before the publish (the
   warm-up is a request too) and between the publish and the message, in both variants.
   vLLM's CPU worker busy-polls for 1 s after each step (see bench/README.md).
5. It prints a markdown table (median and p90 per variant, cold/warm ratio), the cached
   tokens and the publish times (the warm variant's is the warm-up's cost), writes them and
   the raw per-trial data to `bench/results/warmup_ttft-<timestamp>.{md,json}`, then stops
   the worker and shuts the engine down.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import statistics
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from bench import harness

MODULE = "bench.warmup_ttft"

Variant = Literal["warm", "cold"]

# ~4700 characters, ~1040 Gemma tokens (~1200 with the few-shot examples and the message);
# `{policy_id}` comes first.
POLICY = """\
Support policy {policy_id} of ShopCo, an online store for clothing, shoes, home and garden \
goods. You are ShopCo's customer-support assistant. Follow this policy exactly; when it does \
not cover a question, say so and offer to hand the conversation to a human agent.

1. Tone and format. Answer in one to three short, friendly sentences. Use the customer's own \
words for products and order numbers. Apologise at most once per conversation. Never use \
lists, headings or emoji. Do not repeat the question back to the customer.

2. Orders and delivery. Standard delivery takes 3 to 5 business days and costs 4.95 euros, \
free above 50 euros. Express delivery takes 1 to 2 business days and costs 9.95 euros. \
Delivery times count from the day the order ships, not the day it is placed; orders placed \
before 2 pm on a business day usually ship the same day. We ship to all EU countries, \
Switzerland, Norway and the United Kingdom; outside the EU, import duties are paid by the \
customer. A parcel that is more than 3 business days late can be reported for a carrier \
investigation, which takes up to 5 business days; after that we send a replacement or a \
full refund, as the customer prefers. Never promise a delivery date and never invent \
tracking details.

3. Changing or cancelling an order. While an order is "Processing", the customer can change \
the delivery address or cancel it under "My orders". Once it is "Shipped", it can no longer \
be changed; the customer can refuse the parcel or return it for free. Items cannot be added \
to an order that was already placed; the customer places a second order instead, and we \
refund the second shipping fee on request if both orders ship on the same day.

4. Returns. Items can be returned within 30 days of delivery, unworn and with their original \
tags, using the free prepaid label under "My orders" and "Return items". Underwear, swimwear \
with a removed hygiene strip, pierced jewellery, personalised items and opened cosmetics \
cannot be returned unless they are faulty. Sale items can be returned like any other item; \
items marked "final sale" can only be exchanged when faulty. Exchanges for another size are \
free and ship as soon as the return is scanned by the carrier.

5. Refunds. Refunds go to the original payment method within 5 to 10 business days after the \
warehouse has received and checked the return. Gift-card payments are refunded as store \
credit. Original shipping costs are refunded only when the whole order is returned or when \
an item is faulty. If a refund is late, ask for the return tracking number and offer to \
escalate to the payments team, who answer within 2 business days.

6. Damaged or faulty items. Apologise, then offer a free replacement shipped within 2 \
business days or a full refund including shipping. We need one or two photos of the damage \
and of the outer box, uploaded under "My orders" and "Report a problem", within 14 days of \
delivery; later reports go to the warranty team. The customer does not send the item back \
unless we ask; furniture and large appliances are collected by a courier free of charge.

7. Warranty. Electrical goods and furniture carry a 2-year warranty from the delivery date. \
Repairs are handled by the manufacturer's service partner; if a repair is not possible \
within 30 days, we replace the item or refund it, minus nothing. Wear and tear, misuse and \
accidental damage are not covered.

8. Payments and billing. We accept Visa, Mastercard, American Express, PayPal, Klarna, Apple \
Pay and ShopCo gift cards; two discount codes cannot be combined. A pending authorisation \
after a retried payment disappears within 3 to 7 business days and is never captured; a \
real double charge shows two completed transactions and is refunded within 2 business days. \
Never ask for full card numbers, security codes or online-banking passwords; the last four \
digits of the card are enough.

9. Accounts and privacy. Customers reset their password with "Forgot password" on the \
sign-in page; the link is valid for 30 minutes. After 5 failed attempts an account is \
locked for 15 minutes. Never confirm whether an e-mail address has an account, never reveal \
order details to someone who is not signed in, and never change an e-mail address on a \
customer's behalf. Customers can download or delete their data under "Account" and \
"Privacy"; deletion takes up to 30 days.

10. Escalation. Hand the conversation to a human agent when the customer asks for one, \
mentions a legal claim, a chargeback, an injury, or is upset after two answers, and when \
an order is worth more than 500 euros. Say that an agent will reply by e-mail within one \
business day, and do not try to solve the case yourself after that.
"""

BODY = (
    "Hi, my order {{order_id}} arrived today but the {{item}} inside is cracked. "
    "What can you do for me?"
)
VARIABLES: list[dict[str, Any]] = [
    {"name": "order_id", "label": "Order number", "type": "string", "max_length": 20},
    {"name": "item", "label": "Item", "type": "string", "max_length": 80},
]
ITEMS: tuple[str, ...] = (
    "ceramic table lamp",
    "glass vase",
    "mirror",
    "coffee mug set",
    "picture frame",
    "salad bowl",
)


def system_prompt(policy_id: str) -> str:
    return POLICY.format(policy_id=policy_id)


# ---- the cold variant --------------------------------------------------------------------


@contextlib.contextmanager
def warmup_disabled() -> Iterator[None]:
    """The cold variant: publishing does not enqueue the warm-up."""
    from chatapp.prompts import tasks

    task = tasks.warm_template_version
    had_own = "delay" in vars(task)
    original = vars(task).get("delay")
    task.delay = lambda *_args, **_kwargs: None
    try:
        yield
    finally:
        if had_own:
            task.delay = original
        else:
            del task.delay


# ---- measurement -------------------------------------------------------------------------


@dataclass(kw_only=True)
class TrialKey:
    index: int
    variant: Variant
    policy_id: str
    publish_s: float
    warmed: bool
    warm_prompt_tokens: int | None


@dataclass(kw_only=True)
class Trial(harness.Measures, TrialKey):
    """A trial's key, then what it measured (the JSON's key order)."""

    measured: bool = True

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


async def run_trial(*, index: int, variant: Variant, ws: Any, gap_s: float) -> Trial:
    from asgiref.sync import sync_to_async

    from chatapp.prompts import services
    from chatapp.prompts.models import PromptTemplate, PromptTemplateVersion

    policy_id = f"SP-{secrets.token_hex(6).upper()}"
    template: PromptTemplate = await sync_to_async(PromptTemplate.objects.create)(
        name=f"bench-{policy_id}",
        description="warm-up bench",
        system_prompt=system_prompt(policy_id),
        body=BODY,
        variables=VARIABLES,
        sampling={"max_tokens": 40, "temperature": 0.0},
    )
    publish = sync_to_async(services.template_publish)
    await asyncio.sleep(gap_s)
    started = time.perf_counter()
    if variant == "warm":
        version: PromptTemplateVersion = await publish(template=template, user=None)
    else:
        with warmup_disabled():
            version = await publish(template=template, user=None)
    publish_s = time.perf_counter() - started
    await sync_to_async(version.refresh_from_db)()
    warmed = version.warmed_at is not None
    if variant == "warm" and not warmed:
        raise RuntimeError(f"the warm-up failed: {version.warm_error or 'not recorded'}")
    if variant == "cold" and warmed:
        raise RuntimeError("the cold variant was warmed up: the no-op patch did not apply")

    await asyncio.sleep(gap_s)
    frame = {
        "type": "chat.send",
        "id": str(uuid.uuid4()),
        "conversation_id": None,
        "template": {"id": template.pk, "version": version.version, "sha256": version.sha256},
        "variables": {
            "order_id": f"SC-{secrets.randbelow(900000) + 100000}",
            "item": ITEMS[index % len(ITEMS)],
        },
    }
    reply = await harness.send_and_wait(ws=ws, frame=frame)
    return Trial(
        index=index,
        variant=variant,
        policy_id=policy_id,
        publish_s=publish_s,
        warmed=warmed,
        warm_prompt_tokens=version.warm_prompt_tokens,
        **reply.fields(),
    )


# ---- statistics and report ---------------------------------------------------------------


def build_table(trials: Sequence[Trial]) -> str:
    warm = [t for t in trials if t.variant == "warm"]
    cold = [t for t in trials if t.variant == "cold"]
    rows: list[tuple[str, str, float, int]] = [
        # label, attribute, scale, decimals
        ("TTFT, send -> first `chat.delta` (ms)", "ttft_s", 1000.0, 1),
        ("worker `timings.ttft_ms` (ms)", "server_ttft_ms", 1.0, 1),
        ("send -> `chat.accepted` (ms)", "accepted_s", 1000.0, 1),
        ("send -> `chat.done` (ms)", "total_s", 1000.0, 1),
        ("prompt tokens", "prompt_tokens", 1.0, 0),
        ("cached prompt tokens", "cached_prompt_tokens", 1.0, 0),
        ("completion tokens", "completion_tokens", 1.0, 0),
        ("`template_publish` (ms; warm: incl. the warm-up)", "publish_s", 1000.0, 1),
    ]
    lines = [
        "| metric | warm median | warm p90 | cold median | cold p90 | cold/warm (medians) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, attr, scale, decimals in rows:
        w = harness.values_of(warm, attr=attr, scale=scale)
        c = harness.values_of(cold, attr=attr, scale=scale)
        w_med = harness.median(w)
        c_med = harness.median(c)
        ratio = f"{c_med / w_med:.2f}" if w_med else "-"
        cells = [
            label,
            f"{w_med:.{decimals}f}",
            f"{harness.percentile(w, q=0.9):.{decimals}f}",
            f"{c_med:.{decimals}f}",
            f"{harness.percentile(c, q=0.9):.{decimals}f}",
            ratio,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def build_extras(trials: Sequence[Trial]) -> str:
    warm = [t for t in trials if t.variant == "warm"]
    cold = [t for t in trials if t.variant == "cold"]
    warm_tokens = harness.values_of(warm, attr="warm_prompt_tokens")
    no_delta = [t.index for t in trials if t.ttft_s is None]
    cold_hits = [t.index for t in cold if t.cached_prompt_tokens]
    saved = [
        (c.ttft_s - w.ttft_s) * 1000
        for w, c in zip(warm, cold, strict=False)
        if w.ttft_s is not None and c.ttft_s is not None
    ]
    lines = [
        f"- warm-up request (system prefix + few-shot examples): median "
        f"{statistics.median(warm_tokens):.0f} prompt tokens"
        if warm_tokens
        else "- no warm-up",
        f"- paired cold - warm TTFT (trial pairs in order): median "
        f"{statistics.median(saved):.1f} ms"
        if saved
        else "- no pairs",
        f"- cold trials with cached prompt tokens > 0 (should be none): {cold_hits or 'none'}",
        f"- trials without any `chat.delta` (left out of the TTFT rows): {no_delta or 'none'}",
    ]
    return "\n".join(lines)


# ---- main --------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from inference.settings import WorkerSettings

    worker_settings = WorkerSettings.from_env()
    trials: list[Trial] = []
    async with harness.loaded_engine(worker_settings=worker_settings) as loaded:
        await loaded.start_worker(settings=worker_settings)
        async with harness.chat_socket() as ws:
            variants: list[Variant] = ["warm", "cold"]
            schedule = [variants[i % 2] for i in range(2 * args.warmup)]
            schedule += [variants[i % 2] for i in range(2 * args.trials)]
            for i, variant in enumerate(schedule):
                trial = await run_trial(index=i, variant=variant, ws=ws, gap_s=args.gap)
                trial.measured = i >= 2 * args.warmup
                trials.append(trial)
                ttft = "-" if trial.ttft_s is None else f"{trial.ttft_s * 1000:7.1f}"
                label = f"{i + 1 - 2 * args.warmup:2d}" if trial.measured else "wu"
                print(
                    f"[{label}] {variant:4s} publish {trial.publish_s * 1000:7.1f} ms | TTFT "
                    f"{ttft} ms (worker {trial.server_ttft_ms}) | prompt "
                    f"{trial.prompt_tokens}, cached {trial.cached_prompt_tokens} | "
                    f"{trial.answer[:60]!r}",
                    flush=True,
                )
    return {"load_s": loaded.load_s, "trials": trials}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--trials", type=int, default=12, help="measured trials per variant (default 12)"
    )
    parser.add_argument(
        "--warmup", type=int, default=1, help="unmeasured warm+cold trial pairs first (1)"
    )
    harness.add_engine_args(parser)
    args = parser.parse_args(argv)
    if args.trials < 1 or args.warmup < 0:
        parser.error("--trials must be >= 1 and --warmup >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    model_dir: Path = args.model_dir.resolve()
    result = harness.run_in_fresh_app(run, args, prefix="warmup_ttft-")

    trials: list[Trial] = result["trials"]
    measured = [t for t in trials if t.measured]
    stamp = harness.timestamp()
    header = (
        f"warmup_ttft {stamp}: {args.trials} trials per variant, interleaved warm/cold after "
        f"{args.warmup} unmeasured pair(s), {args.gap:g} s idle before every request; each "
        "trial publishes a new template with a unique ~1040-token system prompt and sends "
        "its first message over the WebSocket\n\n"
        f"- CPU: {harness.machine()}\n"
        f"- model: {model_dir} (loaded in {result['load_s']:.1f} s)\n"
        f"- command: `{harness.command_line(module=MODULE)}`"
    )
    markdown = "\n\n".join([header, build_table(measured), build_extras(measured)])
    print("\n" + markdown, flush=True)
    report = harness.report_base(stamp=stamp, model_dir=model_dir, module=MODULE) | {
        "trials_per_variant": args.trials,
        "warmup_pairs": args.warmup,
        "gap_s": args.gap,
        "engine_load_s": result["load_s"],
        "trials": [t.to_json() for t in trials],
    }
    harness.write_results(name="warmup_ttft", stamp=stamp, markdown=markdown, report=report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
