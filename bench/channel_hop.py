"""The relay -> socket hop when both are in one web process: through Redis vs handed over in it.

Run from the repository root with Redis on 127.0.0.1:6379 (`.ci/run` starts one):

    .venv/bin/python -m bench.channel_hop [--rounds 6] [--messages 100] [--redis-url URL]

Each message is sent to a process-local channel of the same layer (as the relay sends each
answer entry to the socket it streams to) and received, one at a time: send -> received, ms.
"through Redis" is channels_redis's own layer (about eight round trips per message); "in
process" is `ResilientRedisChannelLayer`, which hands a message for a channel of its own
process over without Redis. The rounds alternate between the two, on one event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from typing import Any

from bench import harness

MODULE = "bench.channel_hop"
ENTRY = {"type": "answer.entry", "entry": {"seq": 0, "text": "a streamed delta "}}


async def _timed(layer: Any, *, messages: int) -> list[float]:
    channel = await layer.new_channel()
    receive = asyncio.create_task(layer.receive(channel))
    await asyncio.sleep(0.2)  # the receive waits on Redis, as a socket's does between deltas
    took: list[float] = []
    for _ in range(messages):
        started = time.perf_counter()
        await layer.send(channel, ENTRY)
        await receive
        took.append((time.perf_counter() - started) * 1000)
        receive = asyncio.create_task(layer.receive(channel))
    receive.cancel()
    await asyncio.gather(receive, return_exceptions=True)
    return took


async def run(args: argparse.Namespace) -> dict[str, list[float]]:
    from channels_redis.core import RedisChannelLayer

    from inference.wire.resilient_layer import ResilientRedisChannelLayer
    from inference.wire.transport import redis_layer_config

    config = {**redis_layer_config(redis_url=args.redis_url), "prefix": "bench-channel-hop"}
    arms: dict[str, Any] = {
        "through Redis": RedisChannelLayer(**config),
        "in process": ResilientRedisChannelLayer(**config),
    }
    samples: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(args.rounds):
        for name, layer in arms.items():
            samples[name] += await _timed(layer, messages=args.messages)
    for layer in arms.values():
        await layer.flush()
        await layer.close_pools()
    return samples


def table(samples: dict[str, list[float]]) -> str:
    lines = [
        "| relay -> socket, one process | messages | P50 ms | P95 ms |",
        "|---|---:|---:|---:|",
    ]
    for name, took in samples.items():
        p50, p95 = harness.percentile(took, q=0.5), harness.percentile(took, q=0.95)
        lines.append(f"| {name} | {len(took)} | {p50:.3f} | {p95:.3f} |")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=MODULE, description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--messages", type=int, default=100, help="per arm and round")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    stamp = harness.timestamp()
    samples = asyncio.run(run(args))
    markdown = "\n".join(
        [
            f"channel_hop {stamp}: {harness.machine()}",
            f"command: `{harness.command_line(module=MODULE)}`",
            "",
            table(samples),
        ]
    )
    print(markdown)
    harness.write_results(
        name="channel_hop", stamp=stamp, markdown=markdown, report={"samples_ms": samples}
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
