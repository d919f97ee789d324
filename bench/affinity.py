"""Routing affinity with real engines: prefix-cache reuse on follow-up turns, with and without.

    .venv/bin/python -m bench.affinity [--conversations 30] [--turns 6]

What it runs: its own redis-server on a free port and two `python -m inference` workers, each
with its own vLLM engine (`--model`, default the tiny locally built model) on that Redis.
The bench is the requester, exactly as a web process's relay is: it puts each turn on the
request queue through `inference.wire.affinity.route` (affinity on: the conversation's last
worker's own queue while it is alive with a free slot; off: always the shared queue, any
worker takes it) and reads the worker's events from the Redis channel layer.

Conversations: each opens with a long pasted text of its own (`--paste-words`, a ticket
history no other conversation shares, so only its own earlier turns can be in a cache) and
goes on with short follow-ups; the assistant turns are the model's own answers (greedy,
`--max-tokens`). Conversations alternate between the two arms (even: affinity, odd: none),
run `--concurrency` at a time, so both arms share the same machine state, the same two
engines and the same noise. Two engines on 2 cores slow each other; the comparison is fair
because both arms run interleaved on the same pair.

Reported per arm, over follow-up turns (2..N): the share of prompt tokens vLLM served from its
prefix cache (`cached_prompt_tokens / prompt_tokens` from each `done`), where the turns ran
(on the worker of the previous turn or not), and TTFT P50/P95 as the worker measured it
(`ttft_ms`) and as the requester saw it (put -> first delta). Results:
bench/results/affinity-<stamp>.{md,json}.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import (
    REPO_ROOT,
    ServerProcess,
    free_port,
    machine,
    percentile,
    report_base,
    timestamp,
    write_results,
)

WORDS = [
    "order",
    "parcel",
    "refund",
    "invoice",
    "courier",
    "address",
    "warehouse",
    "delay",
    "customer",
    "ticket",
    "account",
    "payment",
    "card",
    "shipment",
    "return",
    "label",
    "tracking",
    "carrier",
    "replacement",
    "warranty",
    "subscription",
]


@dataclass
class Turn:
    arm: str
    conversation: int
    index: int
    prompt_tokens: int = 0
    cached_tokens: int = 0
    ttft_ms: float = 0.0  # the worker's
    client_ttft_ms: float = 0.0  # put -> first delta
    worker: str = ""
    same_worker: bool | None = None  # as the previous turn's (None: the first turn)
    error: str = ""


@dataclass
class Arm:
    name: str
    turns: list[Turn] = field(default_factory=list)

    def follow_ups(self) -> list[Turn]:
        return [t for t in self.turns if t.index > 0 and not t.error]

    def summary(self) -> dict[str, Any]:
        follow = self.follow_ups()
        prompt = sum(t.prompt_tokens for t in follow)
        cached = sum(t.cached_tokens for t in follow)
        ttft = [t.ttft_ms for t in follow]
        client = [t.client_ttft_ms for t in follow]
        return {
            "follow_up_turns": len(follow),
            "errors": sum(1 for t in self.turns if t.error),
            "cached_share": cached / prompt if prompt else 0.0,
            "prompt_tokens": prompt,
            "cached_tokens": cached,
            "same_worker_share": sum(1 for t in follow if t.same_worker) / len(follow)
            if follow
            else 0.0,
            "worker_ttft_ms_p50": percentile(ttft, q=0.5) if ttft else 0.0,
            "worker_ttft_ms_p95": percentile(ttft, q=0.95) if ttft else 0.0,
            "client_ttft_ms_p50": percentile(client, q=0.5) if client else 0.0,
            "client_ttft_ms_p95": percentile(client, q=0.95) if client else 0.0,
        }


def paste(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


async def run_conversation(
    *,
    arm: Arm,
    number: int,
    turns: int,
    paste_words: int,
    max_tokens: int,
    redis_url: str,
    layer: Any,
    affinity_on: bool,
) -> None:
    from inference.wire.affinity import affinity_map, route
    from inference.wire.protocol import (
        REQUEST_CHANNEL,
        ChatTurn,
        GenerateRequest,
        SamplingOptions,
        worker_event_adapter,
    )
    from inference.wire.registry import RedisWorkerRegistry
    from inference.wire.stream_queue import RedisStreamQueue

    rng = random.Random(number)  # noqa: S311 - reproducible text, not a secret
    queue = RedisStreamQueue(redis_url=redis_url)
    registry = RedisWorkerRegistry(redis_url=redis_url)
    affinity = affinity_map(redis_url=redis_url, ttl_s=3600)
    session = str(uuid.uuid4())
    history: list[ChatTurn] = []
    previous_worker = ""
    try:
        for index in range(turns):
            text = (
                f"Ticket {session[:8]}: here is the history. {paste(rng, paste_words)}. "
                "What happened to my order?"
                if index == 0
                else f"Follow-up {index}: {paste(rng, 12)}?"
            )
            history.append(ChatTurn(role="user", content=text))
            reply = await layer.new_channel()
            request = GenerateRequest(
                request_id=str(uuid.uuid4()),
                reply_channel=reply,
                system="You are a support assistant. Answer in one short sentence.",
                messages=list(history),
                sampling=SamplingOptions(max_tokens=max_tokens, temperature=0.0),
                submitted_at=time.time(),
                session_id=session,
            )
            target = (
                await route(
                    queue=REQUEST_CHANNEL, session_id=session, affinity=affinity, registry=registry
                )
                if affinity_on
                else REQUEST_CHANNEL
            )
            turn = Turn(arm=arm.name, conversation=number, index=index)
            arm.turns.append(turn)
            sent = time.monotonic()
            await queue.put(target, request.to_channel())
            answer = ""
            async with asyncio.timeout(300):
                while True:
                    event = worker_event_adapter.validate_python(await layer.receive(reply))
                    if event.type == "inference.accepted":
                        turn.worker = event.worker_channel
                        if affinity_on:
                            await affinity.remember(session, event.worker_channel)
                    elif event.type == "inference.delta":
                        if not turn.client_ttft_ms:
                            turn.client_ttft_ms = (time.monotonic() - sent) * 1000
                        answer += event.text
                    elif event.type == "inference.done":
                        turn.prompt_tokens = event.prompt_tokens
                        turn.cached_tokens = event.cached_prompt_tokens
                        turn.ttft_ms = event.ttft_ms or 0.0
                        break
                    elif event.type == "inference.error":
                        turn.error = event.code
                        break
            if index > 0:
                turn.same_worker = turn.worker == previous_worker
            previous_worker = turn.worker
            history.append(ChatTurn(role="assistant", content=answer or "."))
    finally:
        await queue.aclose()
        await registry.aclose()
        await affinity.aclose()


def markdown(stamp: str, args: argparse.Namespace, arms: list[Arm], elapsed: float) -> str:
    lines = [
        f"# Routing affinity, {stamp}",
        "",
        f"`{' '.join(sys.argv)}` on {machine()}: 2 workers (one vLLM engine each, "
        f"{Path(args.model).name}), {args.conversations} conversations x {args.turns} turns "
        f"(first turn ~{args.paste_words} pasted words, then short follow-ups), "
        f"{args.concurrency} at a time, arms interleaved; {elapsed:.0f} s in all.",
        "",
        "| arm | follow-up turns | prompt tokens from the prefix cache | on the previous "
        "turn's worker | worker TTFT P50 / P95 (ms) | requester TTFT P50 / P95 (ms) | errors |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm in arms:
        s = arm.summary()
        lines.append(
            f"| {arm.name} | {s['follow_up_turns']} | {s['cached_share']:.1%} "
            f"({s['cached_tokens']}/{s['prompt_tokens']}) | {s['same_worker_share']:.0%} | "
            f"{s['worker_ttft_ms_p50']:.0f} / {s['worker_ttft_ms_p95']:.0f} | "
            f"{s['client_ttft_ms_p50']:.0f} / {s['client_ttft_ms_p95']:.0f} | {s['errors']} |"
        )
    return "\n".join(lines)


def worker_env(*, redis_url: str, model: str, data_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "REDIS_URL": redis_url,
        "MODEL": model,
        "CHAT_DATA_DIR": str(data_dir),
        "INFERENCE_ENGINE": "vllm",
        "INFERENCE_FAQ": "0",
        "INFERENCE_METRICS_PORT": str(free_port()),
        "INFERENCE_START_WARMUP_S": "0",
        "INFERENCE_MAX_ACTIVE": "8",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_MAX_MODEL_LEN": "4096",
        "PYTHONUNBUFFERED": "1",
    }


async def main_async(args: argparse.Namespace) -> int:
    from inference.wire.registry import RedisWorkerRegistry
    from inference.wire.transport import redis_channel_layer

    stamp = timestamp()
    logs = REPO_ROOT / "bench" / "results" / f"affinity-{stamp}-logs"
    redis_port = free_port()
    redis_server = ServerProcess(
        args=["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", ""],
        env=dict(os.environ),
        log_path=logs / "redis.log",
    )
    redis_server.start()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    data_dir = Path(os.environ.get("CHAT_DATA_DIR") or REPO_ROOT / "data")
    workers = [
        ServerProcess(
            args=[sys.executable, "-m", "inference"],
            env=worker_env(redis_url=redis_url, model=args.model, data_dir=data_dir),
            log_path=logs / f"worker-{n}.log",
        )
        for n in range(2)
    ]
    try:
        await asyncio.sleep(0.5)
        for worker in workers:  # one at a time: two model loads on 2 cores race for memory
            worker.start()
            registry = RedisWorkerRegistry(redis_url=redis_url)
            try:
                async with asyncio.timeout(300):
                    while "Inference worker ready" not in worker.log_text():
                        worker.check_alive()
                        await asyncio.sleep(0.5)
            finally:
                await registry.aclose()
            print(f"worker {worker.log_path.name} ready", flush=True)
        await asyncio.sleep(2)  # both announced
        layer = redis_channel_layer(redis_url=redis_url)
        arms = [Arm("affinity"), Arm("no affinity")]
        started = time.monotonic()
        gate = asyncio.Semaphore(args.concurrency)

        async def one(number: int) -> None:
            arm = arms[number % 2]
            async with gate:
                await run_conversation(
                    arm=arm,
                    number=number,
                    turns=args.turns,
                    paste_words=args.paste_words,
                    max_tokens=args.max_tokens,
                    redis_url=redis_url,
                    layer=layer,
                    affinity_on=arm.name == "affinity",
                )

        # each arm gets `conversations`; interleaved so both see the same conditions
        await asyncio.gather(*(one(n) for n in range(2 * args.conversations)))
        elapsed = time.monotonic() - started
        text = markdown(stamp, args, arms, elapsed)
        print(text)
        report = {
            **report_base(stamp=stamp, model_dir=Path(args.model), module="bench.affinity"),
            "args": vars(args),
            "elapsed_s": elapsed,
            "arms": {arm.name: arm.summary() for arm in arms},
            "turns": [t.__dict__ for arm in arms for t in arm.turns],
        }
        write_results(name="affinity", stamp=stamp, markdown=text, report=report)
        return 0
    finally:
        for worker in workers:
            worker.stop()
        redis_server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.affinity", description=__doc__)
    parser.add_argument("--conversations", type=int, default=30, help="per arm")
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--paste-words", type=int, default=300)
    parser.add_argument("--max-tokens", type=int, default=12)
    parser.add_argument("--concurrency", type=int, default=6)
    parser.add_argument(
        "--model", default=str(REPO_ROOT / "data" / "models" / "tiny-llama"), help="model folder"
    )
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
