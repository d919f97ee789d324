"""Typing prefill: time to first token of a question sent after its draft was prefilled, vs not.

Run from the repository root (the default model prepared):

    .venv/bin/python -m bench.typing_prefill [--rounds 6] [--lead 3] [--gap 1.5]

What happens, in one process and one event loop (the real app on a throwaway SQLite data
dir, the real vLLM engine and its worker, the socket through `chatapp.asgi.application`):

1. Every round opens four conversations, each with a short first question answered: a long
   paste with typing prefill, a long paste without, an ordinary follow-up with, one without.
2. Long paste: about 1,000 tokens of an order log (its own lines per conversation, so no arm
   finds another's text in the cache) is "pasted" `--lead` seconds before Send: with prefill
   the page's `chat.draft` goes out then (as `DraftPrefill` sends it after a paste); without,
   the same wait passes with nothing sent. Then the question is sent and timed.
3. Ordinary follow-up: a one-line question, the draft sent `--lead` seconds before Send.
4. The arms run in alternating order each round, so that neither always goes first.
5. Then `--typers` other users type (a draft every `--typing-every` seconds each, growing
   like a paste) while one user asks ordinary questions, against the same questions with
   nobody typing, alternating: the interactive TTFT P95 with and without typists.

Answers are capped at 8 tokens (`CHAT_MAX_TOKENS`): only the first token is measured. TTFT is
the worker's (`chat.done` `timings.ttft_ms`) and the socket's (send -> first delta).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import harness

MODULE = "bench.typing_prefill"
APP_ENV = {"CHAT_MAX_TOKENS": "8", "CHAT_FAQ_ENABLED": "0", "INFERENCE_FAQ": "0"}
OPENING = "Hi, I need help with an order."
FOLLOW_UP = "Which of these can still be cancelled today?"


def ordinary(n: int) -> str:
    """A one-line follow-up of its own (the same words twice would be cached either way)."""
    return f"And how long does a refund for order {1000 + n} usually take?"


@dataclass(frozen=True)
class Sample:
    arm: str  # paste_prefill, paste_plain, follow_prefill, follow_plain, typers, quiet
    round: int
    prompt_tokens: int | None
    cached_prompt_tokens: int | None
    worker_ttft_ms: float | None
    socket_ttft_ms: float | None


def order_log(seed: int, *, lines: int) -> str:
    """A pasted order history of its own: about 24 tokens a line."""
    rng = random.Random(seed)  # noqa: S311  # test data, not secrets
    items = ["blue jacket", "running shoes", "gift card", "phone case", "desk lamp", "backpack"]
    states = ["shipped", "processing", "delivered", "returned", "on hold"]
    rows = [
        f"Order #{rng.randint(100000, 999999)} placed 2026-11-{rng.randint(1, 28):02d}: "
        f"{rng.randint(1, 4)} x {rng.choice(items)}, {rng.choice(states)}, "
        f"{rng.randint(5, 300)}.{rng.randint(0, 99):02d} EUR"
        for _ in range(lines)
    ]
    return "Here is my order history:\n" + "\n".join(rows) + f"\n{FOLLOW_UP}"


def draft(text: str, conversation_id: str | None) -> dict[str, Any]:
    return {
        "type": "chat.draft",
        "id": str(uuid.uuid4()),
        "conversation_id": conversation_id,
        "text": text,
    }


def arm_text(question: str, kind: str, *, round_: int, lines: int) -> str:
    """Each arm's own text, so none finds another's in the prefix cache."""
    n = 2 * round_ + (kind == "plain")
    return order_log(1000 + n, lines=lines) if question == "paste" else ordinary(n)


async def ask(ws: Any, frame: dict[str, Any]) -> tuple[str, dict[str, Any], float | None]:
    """Send and read to `chat.done`: the conversation id, the done frame, the socket TTFT (ms)."""
    started = time.perf_counter()
    await ws.send_json_to(frame)
    conversation, first = "", None
    while True:
        reply: dict[str, Any] = await ws.receive_json_from(timeout=300)
        kind = reply["type"]
        if kind == "chat.accepted":
            conversation = str(reply["conversation_id"])
        elif kind == "chat.delta" and first is None:
            first = (time.perf_counter() - started) * 1000
        elif kind == "chat.done":
            return conversation, reply, first
        elif kind == "chat.error":
            raise RuntimeError(f"refused: {reply}")


async def open_conversation(ws: Any, *, gap_s: float) -> str:
    await asyncio.sleep(gap_s)
    conversation, _done, _ttft = await ask(ws, harness.chat_send(OPENING))
    return conversation


async def timed(ws: Any, *, arm: str, round_: int, frame: dict[str, Any]) -> Sample:
    _conversation, done, socket_ttft = await ask(ws, frame)
    usage, timings = done.get("usage") or {}, done.get("timings") or {}
    return Sample(
        arm=arm,
        round=round_,
        prompt_tokens=usage.get("prompt_tokens"),
        cached_prompt_tokens=usage.get("cached_prompt_tokens"),
        worker_ttft_ms=timings.get("ttft_ms"),
        socket_ttft_ms=socket_ttft,
    )


async def with_lead(
    ws: Any, *, arm: str, round_: int, conversation: str, text: str, prefill: bool, lead_s: float
) -> Sample:
    if prefill:
        await ws.send_json_to(draft(text, conversation))
    await asyncio.sleep(lead_s)  # the user looks it over before Send
    return await timed(
        ws, arm=arm, round_=round_, frame=harness.chat_send(text, conversation_id=conversation)
    )


async def typist(ws: Any, *, seed: int, every_s: float, stop: asyncio.Event) -> int:
    """Types a growing question in a conversation of its own; returns the drafts sent."""
    conversation = None
    text = order_log(seed, lines=4)
    sent = 0
    while not stop.is_set():
        text += f" and one more line {sent}"
        await ws.send_json_to(draft(text, conversation))
        sent += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)
    return sent


async def run(args: argparse.Namespace) -> dict[str, Any]:

    from inference.settings import WorkerSettings

    worker_settings = WorkerSettings.from_env().model_copy(update={"faq": False})
    samples: list[Sample] = []
    drafts_typed = 0
    async with harness.loaded_engine(worker_settings=worker_settings) as loaded:
        await loaded.start_worker(settings=worker_settings)
        async with harness.chat_socket() as ws:
            await ask(ws, harness.chat_send("warm up"))
            for r in range(args.rounds):
                convs = {
                    arm: await open_conversation(ws, gap_s=args.gap)
                    for arm in ("paste_prefill", "paste_plain", "follow_prefill", "follow_plain")
                }
                order = ["prefill", "plain"] if r % 2 == 0 else ["plain", "prefill"]
                for question in ("paste", "follow"):
                    for kind in order:
                        arm = f"{question}_{kind}"
                        await asyncio.sleep(args.gap)
                        sample = await with_lead(
                            ws,
                            arm=arm,
                            round_=r,
                            conversation=convs[arm],
                            text=arm_text(question, kind, round_=r, lines=args.lines),
                            prefill=kind == "prefill",
                            lead_s=args.lead,
                        )
                        samples.append(sample)
                        print(f"[{r + 1}] {sample}", flush=True)
            if args.typers:
                sockets = [harness.chat_socket(username=f"typist{i}") for i in range(args.typers)]
                typing = [await s.__aenter__() for s in sockets]
                try:
                    for r in range(args.rounds):
                        for arm in ("quiet", "typers") if r % 2 == 0 else ("typers", "quiet"):
                            conversation = await open_conversation(ws, gap_s=args.gap)
                            stop = asyncio.Event()
                            tasks = (
                                [
                                    asyncio.create_task(
                                        typist(
                                            t,
                                            seed=7000 + 10 * r + i,
                                            every_s=args.typing_every,
                                            stop=stop,
                                        )
                                    )
                                    for i, t in enumerate(typing)
                                ]
                                if arm == "typers"
                                else []
                            )
                            await asyncio.sleep(args.lead)
                            sample = await timed(
                                ws,
                                arm=arm,
                                round_=r,
                                frame=harness.chat_send(
                                    ordinary(100 + 2 * r + (arm == "quiet")),
                                    conversation_id=conversation,
                                ),
                            )
                            stop.set()
                            drafts_typed += sum(await asyncio.gather(*tasks))
                            samples.append(sample)
                            print(f"[{r + 1}] {sample}", flush=True)
                finally:
                    for s in sockets:
                        await s.__aexit__(None, None, None)
    return {"load_s": loaded.load_s, "samples": samples, "drafts_typed": drafts_typed}


def table(samples: Sequence[Sample]) -> str:
    def stat(arm: str, field: str, q: float) -> float:
        values = [
            float(v) for s in samples if s.arm == arm and (v := getattr(s, field)) is not None
        ]
        return harness.percentile(values, q=q)

    rows = [
        "| question | arm | n | prompt tokens (median) | cached (median) "
        "| worker TTFT P50 / P95 ms | socket TTFT P50 / P95 ms | with/without (worker P50) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, with_arm, without_arm in (
        ("~1,000-token paste", "paste_prefill", "paste_plain"),
        ("ordinary follow-up", "follow_prefill", "follow_plain"),
        ("others type meanwhile", "typers", "quiet"),
    ):
        ratio = stat(with_arm, "worker_ttft_ms", 0.5) / stat(without_arm, "worker_ttft_ms", 0.5)
        for arm in (with_arm, without_arm):
            n = sum(1 for s in samples if s.arm == arm)
            if not n:
                continue
            rows.append(
                f"| {label} | {arm} | {n} | {stat(arm, 'prompt_tokens', 0.5):.0f} | "
                f"{stat(arm, 'cached_prompt_tokens', 0.5):.0f} | "
                f"{stat(arm, 'worker_ttft_ms', 0.5):.0f} / "
                f"{stat(arm, 'worker_ttft_ms', 0.95):.0f} | "
                f"{stat(arm, 'socket_ttft_ms', 0.5):.0f} / "
                f"{stat(arm, 'socket_ttft_ms', 0.95):.0f} | "
                + (f"{ratio:.2f}x |" if arm == with_arm else " |")
            )
    p95 = stat("typers", "worker_ttft_ms", 0.95) / stat("quiet", "worker_ttft_ms", 0.95)
    rows.append(f"\nInteractive worker TTFT P95 with typists / without: {p95:.2f}x")
    return "\n".join(rows)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--lead", type=float, default=3.0, help="draft -> Send, seconds")
    parser.add_argument("--lines", type=int, default=40, help="order-log lines (~24 tokens each)")
    parser.add_argument("--typers", type=int, default=4, help="other users typing (0: skip)")
    parser.add_argument("--typing-every", type=float, default=0.5)
    harness.add_engine_args(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    model_dir: Path = args.model_dir.resolve()
    result = harness.run_in_fresh_app(run, args, prefix="typing_prefill-", extra_env=APP_ENV)
    samples: list[Sample] = result["samples"]
    stamp = harness.timestamp()
    header = (
        f"typing_prefill {stamp}: {args.rounds} rounds; the draft {args.lead:g} s before Send; "
        f"{args.typers} typists, a draft every {args.typing_every:g} s each "
        f"({result['drafts_typed']} drafts); {args.gap:g} s idle before each question\n\n"
        f"- machine: {harness.machine()}\n- model: {model_dir} (loaded in "
        f"{result['load_s']:.1f} s)\n- command: `{harness.command_line(module=MODULE)}`"
    )
    markdown = "\n\n".join([header, table(samples)])
    print("\n" + markdown, flush=True)
    report = harness.report_base(stamp=stamp, model_dir=model_dir, module=MODULE) | {
        "samples": [asdict(s) for s in samples],
        "drafts_typed": result["drafts_typed"],
        "started": time.time(),
    }
    harness.write_results(name="typing_prefill", stamp=stamp, markdown=markdown, report=report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
