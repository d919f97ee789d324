"""The worker's Prometheus metrics on the real vLLM engine (tiny model): the prefix-cache
counters come from vLLM's own stat logger and rise when two requests share a prefix."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.layers import InMemoryChannelLayer
from prometheus_client import REGISTRY

from inference.wire.protocol import REQUEST_CHANNEL
from tests.inference.worker_events import metrics_page
from tests.support.embedded import embedded_queue
from tests.support.vllm import SHARED, fresh, request, run_to_end

pytestmark = [pytest.mark.vllm, pytest.mark.asyncio(loop_scope="session")]

QUERIES = "chat:engine_prefix_cache_queries_total"
HITS = "chat:engine_prefix_cache_hits_total"


def value(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def answer(layer: InMemoryChannelLayer, text: str) -> Any:
    reply = await layer.new_channel()
    await embedded_queue().put(REQUEST_CHANNEL, request(reply, text))
    return (await run_to_end(layer, reply))[-1]


async def test_prefix_cache_counters_rise_when_two_requests_share_a_prefix(
    vllm_layer: InMemoryChannelLayer,
) -> None:
    queries_before, hits_before = value(QUERIES), value(HITS)
    shared = fresh(SHARED)
    first = await answer(vllm_layer, f"{shared} Which clause covers refunds?")
    second = await answer(vllm_layer, f"{shared} And which covers returns?")
    assert first.type == second.type == "inference.done"
    await asyncio.sleep(0.5)  # vLLM hands its stats to the stat logger after the step

    queries = value(QUERIES) - queries_before
    hits = value(HITS) - hits_before
    # both prompts were looked up, token by token, as vLLM counts them
    assert queries >= first.prompt_tokens + second.prompt_tokens
    # the second reused whole cached blocks of the shared text
    assert hits >= second.cached_prompt_tokens >= 512
    assert value("chat:num_requests_running") == 0
    assert value("chat:num_requests_waiting") == 0

    page = await metrics_page()  # and a standalone worker would serve the same numbers
    served = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in page.splitlines()
        if line.startswith("chat:engine_prefix_cache")
    }
    assert served[HITS] == value(HITS)
