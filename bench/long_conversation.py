"""A long support conversation over the real chat socket: does the history stay cached?

Run from the repository root (the app's default model, SmolLM2, must be prepared:
`python -m modelprep prepare --model smollm2`):

    .venv/bin/python -m bench.long_conversation [--turns 40] [--max-model-len 2048]
        [--block-size 128] [--max-tokens 64] [--repeats 3] [--model-dir DIR]
        [--trim-prefill on|off|both]
    .venv/bin/python -m bench.long_conversation --compare-models [--models DIR,DIR]

What happens (issue 15 item 9), all in this process and inside one asyncio loop, like the
other in-process benches (`bench/harness.py`):

1. The embedded default app on a throwaway data dir (`fresh_app`: in-memory channel layer,
   eager Celery, fresh SQLite) with `VLLM_MAX_MODEL_LEN` = `--max-model-len` (2048: small
   enough that 40 turns outgrow it and the worker trims the history) and, if given,
   `VLLM_BLOCK_SIZE` = `--block-size`; the engine (`loaded_engine`) and its worker.
2. Per repeat, a template whose system prompt starts with a fresh case id (so no repeat can
   reuse another one's cached blocks) and whose sampling is greedy with a fixed `max_tokens`
   (64), published as an admin publishes it; then one conversation of `--turns` user turns
   over `/ws/chat/` (`chat_socket`): the first as a templated `chat.send`, the others as plain
   `chat.send`s into the same conversation. The turns are a customer's realistic follow-ups
   about a thermostat that stopped syncing, with a pasted log of ~300-600 tokens every 6th
   turn. `--gap` seconds of idle before every turn (vLLM's CPU worker busy-polls for 1 s
   after each step, see README).
3. Per turn: prompt, cached prompt and completion tokens (`chat.done` `usage`), TTFT as the
   socket client sees it (send -> first `chat.delta`) and the worker's own (`timings.
   ttft_ms`), and where the kept history starts: the worker's `PromptBuilder.build` is
   wrapped (in this process only) to record its `kept_from`; a turn whose `kept_from` moved
   is a *trim turn*.

Goals:

* prefix cache: at every turn after the first, except trim turns, cached prompt tokens >=
  (previous turn's prompt tokens + its answer tokens) rounded down to the KV block size
  (vLLM caches whole blocks only; the engine's real block size is read from vLLM's config).
  A miss where even `prompt + answer - 1` (the last sampled token never enters the KV cache)
  rounds down to the cached count is marked `boundary`.
* TTFT: the median over repeats of turn `--turns`'s TTFT <= 1.3x that of turn 2.
* no trim cliff (issue 29): every trim turn's client TTFT <= 1.5x the median of the ordinary
  turns up to 3 on each side (same repeat). The worker prefills a trim turn's kept history
  when the answer before it ends (`inference/prefill.py` `trim_prefill`), during the `--gap`
  the user spends reading; `--trim-prefill off` runs without it (the worker's hook is
  switched off in this process), `both` alternates on and off by repeat, so the two arms
  are measured interleaved in one run.

`--compare-models` instead runs, one model after the other (each in its own child process
with its own engine: never two engines at once on the 2 cores), the same 5 customer-service
questions, one story request and one code request on each model (`--models`, default
SmolLM2 alone: add any other Hugging Face folder with a chat template), each as a new
conversation from the same greedy template with the same `--compare-max-tokens` (256) and the
same idle gap, after one unmeasured warm-up request; it
reports TTFT (client and worker), decode tokens/s, answer length, and the first 200
characters of every answer verbatim.

Results: a markdown table on stdout and `bench/results/long_conversation-<timestamp>.{md,json}`
(`long_conversation_models-<timestamp>` for the comparison).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import secrets
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import harness
from inference.prefill import TRIM_PREFILL_PREFIX

# Engine requests that are prefills, not a turn's answer: typing prefill, trim prefill
PREFILL_PREFIXES = ("prefill-", TRIM_PREFILL_PREFIX)

MODULE = "bench.long_conversation"
TTFT_GOAL_RATIO = 1.3
# No trim cliff (issue 29): a trim turn's TTFT <= this x the median of the turns around it
TRIM_TTFT_GOAL_RATIO = 1.5
TRIM_NEIGHBOURS = 3  # turns on each side that make "the turns around it"
DEFAULT_BLOCK_SIZE = 128  # vLLM's CPU default, if the engine's own cannot be read

SYSTEM_PROMPT = (
    "Support case {case}. You are the customer-support assistant of HomeHeat, which sells the "
    "HomeHeat T2 smart thermostat and its phone app. Help the customer step by step: ask for "
    "what you need, explain settings in plain words, and suggest one thing to try at a time. "
    "Firmware updates install overnight; the app syncs over Wi-Fi on 2.4 GHz only; a factory "
    "reset keeps the schedule but forgets the Wi-Fi network. A device under 2 years old that "
    "still fails after a reset is replaced free of charge. Never invent order details, "
    "tracking numbers or error codes. Answer briefly and politely."
)
TEMPLATE_BODY = "{{message}}"
TEMPLATE_VARIABLES: list[dict[str, Any]] = [
    {"name": "message", "label": "Message", "type": "string", "max_length": 4000}
]

# The customer's follow-ups; one starting with LOG gets a pasted log appended (`pasted_log`).
LOG = "LOG:"
FOLLOW_UPS: tuple[str, ...] = (
    "Hi, my HomeHeat T2 thermostat stopped syncing with the app two days ago. The app says "
    "'device offline' but the display on the wall still works. Can you help?",
    "Yes, the router is on and my phone is on the same Wi-Fi. What should I check first?",
    "I restarted the thermostat by holding the button for 10 seconds. It still shows offline.",
    "Where do I find the Wi-Fi settings on the thermostat itself?",
    LOG + "I exported the device log from the app. I am not sure what the 503 errors mean:",
    "Does that log tell you anything about why it shows offline?",
    "My router has both 2.4 GHz and 5 GHz networks with the same name. Could that be it?",
    "OK, I split them. The 2.4 GHz one is now called HomeNet-24. Do I have to reconnect?",
    "The thermostat found HomeNet-24 but asks for a WPA key. Is that the normal Wi-Fi password?",
    "It connected! The app shows the temperature again. Thanks. Will my schedule still be there?",
    LOG + "It went offline again overnight. This is the log from this morning:",
    "What happened there? It was fine yesterday evening.",
    "Could the firmware update have reset the network settings?",
    "How can I see which firmware version is installed?",
    "It says version 4.2.1. Is that the latest one?",
    "Can I stop automatic updates until this is fixed?",
    LOG + "I turned updates off and it dropped again. This is the log since then:",
    "Is it still the same problem, or something new?",
    "My neighbour has the same thermostat and no problems. Is my unit faulty?",
    "I bought it 14 months ago from your web shop. Is it still under warranty?",
    "What do you need from me to start a replacement?",
    "The order number should be in my account, I ordered it with my e-mail address. Is that "
    "enough, or do you need the receipt as well?",
    LOG + "Before I send it back, here is one more log, with debug logging on:",
    "Anything new in that one?",
    "If I do a factory reset, do I lose the heating schedule I set up?",
    "I did the factory reset. It kept the schedule but now it asks for Wi-Fi again, as you said.",
    "Connected again. How long should I wait before we know if it is stable?",
    "It has been stable for an hour. Is there anything I should keep an eye on?",
    LOG + "Sorry, it dropped again. This is the log:",
    "Is it the router after all?",
    "My router is a FritzBox 7530. Is there a setting that could disconnect the thermostat?",
    "I found a setting called 'Wi-Fi power saving'. Should I turn that off?",
    "Turned it off. Should I also give the thermostat a fixed IP address?",
    "How do I find the thermostat's MAC address for that?",
    LOG + "Here is the log since the router change:",
    "It looks quieter to me, do you agree?",
    "Great. If it goes offline again, should I contact you in this same chat?",
    "Can you summarise what we changed today, so I can tell my partner?",
    "One last thing: does the app show a history of when the device was offline?",
    "Thank you for your patience. Is there anything else I should do today?",
)

_LOG_EVENTS = (
    "INFO  [wifi] associated with {ssid} (channel {channel}, rssi -{rssi} dBm)",
    "WARN  [wifi] beacon loss, rssi -{rssi} dBm, reconnecting (attempt {n}/5)",
    "INFO  [dhcp] lease {ip} obtained, expires in {lease} s",
    "ERROR [cloud] sync failed: HTTP 503 from api.homeheat.example (retry in {retry} s)",
    "INFO  [cloud] sync ok, {n} schedule entries, latency {latency} ms",
    "WARN  [mqtt] keepalive timeout after {latency} ms, closing session {session}",
    "INFO  [mqtt] session {session} connected to broker eu-{n}.homeheat.example:8883",
    "DEBUG [sensor] temp {temp} C, humidity {humidity} %, setpoint 20.5 C, relay off",
    "ERROR [wifi] deauth reason 4 (inactivity) from {bssid}",
    "INFO  [ota] checking for updates: current 4.2.1, server 4.2.1, nothing to do",
)


def pasted_log(rng: random.Random, *, lines: int) -> str:
    """A paste of the thermostat's log (synthetic, ~50 SmolLM2 tokens a line)."""
    clock = rng.randint(0, 20_000)
    out = []
    for _ in range(lines):
        clock += rng.randint(1, 400)
        hours, rest = divmod(clock, 3600)
        millis = rng.randint(0, 999)
        stamp = f"2026-11-29 {hours % 24:02d}:{rest // 60:02d}:{rest % 60:02d}.{millis:03d}"
        event = rng.choice(_LOG_EVENTS).format(
            ssid="HomeNet-24",
            channel=rng.choice((1, 6, 11)),
            rssi=rng.randint(48, 86),
            n=rng.randint(1, 5),
            ip=f"192.168.178.{rng.randint(20, 250)}",
            lease=rng.choice((3600, 86400, 864000)),
            retry=rng.choice((8, 16, 32, 64)),
            latency=rng.randint(40, 9000),
            session=f"{rng.getrandbits(32):08x}",
            temp=f"{rng.uniform(18, 23):.1f}",
            humidity=rng.randint(35, 60),
            bssid=":".join(f"{rng.getrandbits(8):02x}" for _ in range(6)),
        )
        out.append(f"{stamp} {event}")
    return "\n".join(out)


def conversation_turns(count: int, *, seed: int) -> list[str]:
    """`count` user turns: the follow-ups in order (again from the top past the 40th, marked
    as a new day), a pasted log of 6-11 lines (~300-600 tokens) at every 6th turn."""
    rng = random.Random(seed)  # noqa: S311 - reproducible text, not a secret
    turns = []
    for index in range(count):
        text = FOLLOW_UPS[index % len(FOLLOW_UPS)]
        if text.startswith(LOG):
            text = text.removeprefix(LOG) + "\n\n" + pasted_log(rng, lines=rng.randint(6, 11))
        if index >= len(FOLLOW_UPS):
            text = f"(Next day) {text}"
        turns.append(text)
    return turns


# ---- the goals (pure) ----------------------------------------------------------------------


def cache_goal(*, prev_prompt_tokens: int, prev_completion_tokens: int, block_size: int) -> int:
    """Cached prompt tokens a turn should have: the previous prompt and its answer, whole
    blocks only."""
    return (prev_prompt_tokens + prev_completion_tokens) // block_size * block_size


def is_trim(
    *,
    prev_kept_from: int | None,
    kept_from: int | None,
    prev_prompt_tokens: int | None,
    prompt_tokens: int | None,
) -> bool:
    """Did the kept history's start move since the previous turn? Without the builder's
    `kept_from` (another engine, another process): the prompt shrank."""
    if prev_kept_from is not None and kept_from is not None:
        return kept_from != prev_kept_from
    if prev_prompt_tokens is not None and prompt_tokens is not None:
        return prompt_tokens < prev_prompt_tokens
    return False


@dataclass(kw_only=True)
class TurnRecord:
    repeat: int
    turn: int  # 1-based
    user_chars: int
    prompt_tokens: int | None
    cached_prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str | None
    ttft_s: float | None  # client: send -> first chat.delta
    server_ttft_ms: float | None
    total_s: float
    kept_from: int | None  # first history message the worker kept (0: all)
    answer: str
    # whether the worker prefilled the next turn's trimmed prompt when an answer ended
    # (`--trim-prefill`: off runs the same conversation without it)
    trim_prefill: bool = True
    # tokens this prompt shares from the start with the previous prompt + the tokens the model
    # generated for it (what a prefix cache could possibly reuse); None where not observed
    reusable_tokens: int | None = None
    trimmed: bool = False
    expected_cached: int | None = None  # the goal; None: turn 1 or a trim turn
    goal_met: bool | None = None
    # why a goal was missed: "boundary" (only the last answer token's block: it never enters
    # the KV cache), "re-rendered" (the cache held every whole block it could: the history
    # re-renders to other tokens than the model generated), "cache" (vLLM had less)
    miss_cause: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def miss_cause(
    *,
    cached: int,
    prev_prompt_tokens: int,
    prev_completion_tokens: int,
    reusable_tokens: int | None,
    block_size: int,
) -> str:
    """Why `cached` fell short of `cache_goal` (see `TurnRecord.miss_cause`)."""
    in_cache = prev_prompt_tokens + prev_completion_tokens - 1  # the last token is never fed
    if (
        reusable_tokens is not None
        and reusable_tokens < in_cache
        and cached >= reusable_tokens // block_size * block_size
    ):
        return "re-rendered"
    if cached >= in_cache // block_size * block_size:
        return "boundary"
    return "cache"


def evaluate(records: Sequence[TurnRecord], *, block_size: int) -> None:
    """Fill in trimmed / expected_cached / goal_met / miss_cause, turn by turn (one repeat)."""
    previous: TurnRecord | None = None
    for record in records:
        record.trimmed = False
        record.expected_cached = None
        record.goal_met = None
        record.miss_cause = None
        if previous is not None:
            record.trimmed = is_trim(
                prev_kept_from=previous.kept_from,
                kept_from=record.kept_from,
                prev_prompt_tokens=previous.prompt_tokens,
                prompt_tokens=record.prompt_tokens,
            )
            if (
                not record.trimmed
                and previous.prompt_tokens is not None
                and previous.completion_tokens is not None
                and record.cached_prompt_tokens is not None
            ):
                want = cache_goal(
                    prev_prompt_tokens=previous.prompt_tokens,
                    prev_completion_tokens=previous.completion_tokens,
                    block_size=block_size,
                )
                record.expected_cached = want
                record.goal_met = record.cached_prompt_tokens >= want
                if not record.goal_met:
                    record.miss_cause = miss_cause(
                        cached=record.cached_prompt_tokens,
                        prev_prompt_tokens=previous.prompt_tokens,
                        prev_completion_tokens=previous.completion_tokens,
                        reusable_tokens=record.reusable_tokens,
                        block_size=block_size,
                    )
        previous = record


@dataclass(frozen=True, kw_only=True)
class TtftGoal:
    first_turn: int
    last_turn: int
    first_ms: float
    last_ms: float

    @property
    def ratio(self) -> float:
        return self.last_ms / self.first_ms if self.first_ms else math.nan

    @property
    def met(self) -> bool:
        return self.ratio <= TTFT_GOAL_RATIO


def ttft_goal(
    records: Sequence[TurnRecord], *, first_turn: int, last_turn: int, server: bool = False
) -> TtftGoal | None:
    """Median TTFT over repeats at `last_turn` vs `first_turn` (client's, or the worker's)."""

    def median_at(turn: int) -> float:
        values = [
            (r.server_ttft_ms if server else (r.ttft_s * 1000 if r.ttft_s is not None else None))
            for r in records
            if r.turn == turn
        ]
        return harness.median([v for v in values if v is not None])

    first, last = median_at(first_turn), median_at(last_turn)
    if math.isnan(first) or math.isnan(last):
        return None
    return TtftGoal(first_turn=first_turn, last_turn=last_turn, first_ms=first, last_ms=last)


@dataclass(frozen=True, kw_only=True)
class TrimCliff:
    """One trim turn of one repeat against the ordinary turns around it."""

    repeat: int
    turn: int
    trim_prefill: bool
    ttft_ms: float
    around_ms: float  # median TTFT of the ordinary turns around it
    prompt_tokens: int | None
    cached_prompt_tokens: int | None

    @property
    def ratio(self) -> float:
        return self.ttft_ms / self.around_ms if self.around_ms else math.nan

    @property
    def met(self) -> bool:
        return self.ratio <= TRIM_TTFT_GOAL_RATIO


def trim_cliffs(
    records: Sequence[TurnRecord], *, neighbours: int = TRIM_NEIGHBOURS
) -> list[TrimCliff]:
    """Every trim turn (of `evaluate`d records) with its client TTFT against the median of the
    ordinary turns (not the first, not a trim turn) up to `neighbours` turns on each side, in
    the same repeat."""
    out = []
    for record in records:
        if not record.trimmed or record.ttft_s is None:
            continue
        around = [
            r.ttft_s * 1000
            for r in records
            if r.repeat == record.repeat
            and r.turn != 1
            and not r.trimmed
            and r.ttft_s is not None
            and 0 < abs(r.turn - record.turn) <= neighbours
        ]
        if not around:
            continue
        out.append(
            TrimCliff(
                repeat=record.repeat,
                turn=record.turn,
                trim_prefill=record.trim_prefill,
                ttft_ms=record.ttft_s * 1000,
                around_ms=harness.median(around),
                prompt_tokens=record.prompt_tokens,
                cached_prompt_tokens=record.cached_prompt_tokens,
            )
        )
    return out


def arms(mode: str, repeats: int) -> list[bool]:
    """Per repeat, whether the worker prefills trimmed prompts: `--trim-prefill` on, off, or
    both (alternating on, off, on, ...: the two arms interleaved in one run)."""
    if mode == "both":
        return [i % 2 == 0 for i in range(repeats)]
    return [mode == "on"] * repeats


# ---- the socket --------------------------------------------------------------------------


@dataclass(kw_only=True)
class Answer:
    conversation_id: str | None
    reply: harness.Reply
    finish_reason: str | None


async def send(ws: Any, frame: dict[str, Any]) -> Answer:
    """Send `frame`, read up to `chat.done`; the conversation id from `chat.accepted`."""
    reply = await harness.send_and_wait(ws=ws, frame=frame, timeout_s=300)
    return Answer(
        conversation_id=reply.conversation_id,
        finish_reason=reply.done.get("finish_reason"),
        reply=reply,
    )


@dataclass(frozen=True, kw_only=True)
class PublishedTemplate:
    id: int
    version: int
    sha256: str

    def first_frame(self, text: str) -> dict[str, Any]:
        return {
            "type": "chat.send",
            "id": str(uuid.uuid4()),
            "conversation_id": None,
            "template": {"id": self.id, "version": self.version, "sha256": self.sha256},
            "variables": {"message": text},
        }


async def publish_template(*, name: str, system_prompt: str, max_tokens: int) -> PublishedTemplate:
    """A greedy template with a fixed answer length, published as an admin publishes it."""
    from asgiref.sync import sync_to_async

    from chatapp.prompts import services
    from chatapp.prompts.models import PromptTemplate

    template = await sync_to_async(PromptTemplate.objects.create)(
        name=name,
        description="bench.long_conversation",
        system_prompt=system_prompt,
        body=TEMPLATE_BODY,
        variables=TEMPLATE_VARIABLES,
        sampling={"max_tokens": max_tokens, "temperature": 0.0},
    )
    version = await sync_to_async(services.template_publish)(template=template, user=None)
    return PublishedTemplate(id=template.pk, version=version.version, sha256=version.sha256)


class PromptSpy:
    """What the worker built and what the engine generated, per request, in this process.

    Wraps the engine's prompt builder (each build's `kept_from` and prompt tokens) and, for
    vLLM, `AsyncLLM.generate` (the answer's token ids), so the report can tell a history that
    re-renders to other tokens than the model generated from a prefix cache that forgot."""

    def __init__(self, engine: Any) -> None:
        self.builds: list[tuple[int, list[int]]] = []  # (kept_from, prompt token ids)
        self.generated: list[list[int]] = []  # answer token ids per request
        builder = engine.prompt_builder
        build_original: Callable[..., Any] = builder.build

        def build(**kwargs: Any) -> Any:
            built = build_original(**kwargs)
            messages = kwargs.get("messages")
            # a question's prompt: not a warm-up (system block alone), not a trim prefill
            # (a history that ends with an answer)
            if messages and messages[-1].role == "user":
                self.builds.append((int(built.kept_from), list(built.token_ids)))
            return built

        setattr(builder, "build", build)  # noqa: B010 - an instance attribute, on purpose
        llm = getattr(engine, "_llm", None)
        if llm is None:
            return
        generate_original: Callable[..., Any] = llm.generate

        def generate(*args: Any, **kwargs: Any) -> Any:
            ids: list[int] = []
            if not str(args[2] if len(args) > 2 else kwargs.get("request_id")).startswith(
                PREFILL_PREFIXES
            ):
                self.generated.append(ids)

            async def outputs() -> Any:
                async for output in generate_original(*args, **kwargs):
                    ids.extend(output.outputs[0].token_ids)
                    yield output

            return outputs()

        setattr(llm, "generate", generate)  # noqa: B010

    def mark(self) -> tuple[int, int]:
        return len(self.builds), len(self.generated)

    def since(self, mark: tuple[int, int]) -> tuple[int | None, list[int] | None, list[int]]:
        """kept_from and prompt ids of the last build after `mark`, and the last answer's ids."""
        builds, generated = mark
        kept, ids = self.builds[-1] if len(self.builds) > builds else (None, None)
        answer = self.generated[-1] if len(self.generated) > generated else []
        return kept, ids, answer


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def engine_block_size(engine: Any, *, asked: int | None) -> int:
    """The KV block size the engine really runs with (vLLM's config), else what was asked."""
    llm = getattr(engine, "_llm", None)
    size = getattr(
        getattr(getattr(llm, "vllm_config", None), "cache_config", None), "block_size", 0
    )
    return int(size) if isinstance(size, int) and size > 0 else (asked or DEFAULT_BLOCK_SIZE)


# ---- the long conversation ---------------------------------------------------------------


async def run_conversation(
    *, ws: Any, spy: PromptSpy, args: argparse.Namespace, repeat: int, trim_prefill: bool
) -> list[TurnRecord]:
    case = f"HH-{secrets.token_hex(4).upper()}"
    template = await publish_template(
        name=f"long-conversation-{case}",
        system_prompt=SYSTEM_PROMPT.format(case=case),
        max_tokens=args.max_tokens,
    )
    turns = conversation_turns(args.turns, seed=args.seed)
    records: list[TurnRecord] = []
    conversation_id: str | None = None
    previous_ids: list[int] | None = None  # the previous prompt + its answer, in tokens
    for number, text in enumerate(turns, start=1):
        await asyncio.sleep(args.gap)
        frame: dict[str, Any]
        if conversation_id is None:
            frame = template.first_frame(text)
        else:
            frame = harness.chat_send(text, conversation_id=conversation_id)
        mark = spy.mark()
        answer = await send(ws, frame)
        kept_from, prompt_ids, answer_ids = spy.since(mark)
        reusable = None
        if prompt_ids is not None and previous_ids is not None:
            reusable = common_prefix(prompt_ids, previous_ids)
        previous_ids = None if prompt_ids is None else prompt_ids + answer_ids
        conversation_id = conversation_id or answer.conversation_id
        reply = answer.reply
        record = TurnRecord(
            repeat=repeat,
            turn=number,
            user_chars=len(text),
            prompt_tokens=reply.prompt_tokens,
            cached_prompt_tokens=reply.cached_prompt_tokens,
            completion_tokens=reply.completion_tokens,
            finish_reason=answer.finish_reason,
            ttft_s=reply.ttft_s,
            server_ttft_ms=reply.server_ttft_ms,
            total_s=reply.total_s,
            kept_from=kept_from,
            answer=reply.answer,
            trim_prefill=trim_prefill,
            reusable_tokens=reusable,
        )
        records.append(record)
        evaluate(records, block_size=args.block_size_used)
        ttft = "-" if record.ttft_s is None else f"{record.ttft_s * 1000:6.0f}"
        verdict = {True: "ok", False: f"MISS {record.miss_cause}", None: "-"}[record.goal_met]
        print(
            f"[r{repeat}{'' if trim_prefill else ' no-trim-prefill'} t{number:2d}] prompt "
            f"{record.prompt_tokens} cached "
            f"{record.cached_prompt_tokens} (goal {record.expected_cached}, {verdict}) answer "
            f"{record.completion_tokens} reusable {record.reusable_tokens} kept_from "
            f"{record.kept_from}"
            f"{' TRIM' if record.trimmed else ''} | TTFT {ttft} ms (worker "
            f"{record.server_ttft_ms}) | {record.answer[:50]!r}",
            flush=True,
        )
    return records


async def run_long(args: argparse.Namespace) -> dict[str, Any]:
    from inference.settings import WorkerSettings

    worker_settings = WorkerSettings.from_env()
    records: list[TurnRecord] = []
    async with harness.loaded_engine(worker_settings=worker_settings) as loaded:
        assert loaded.engine is not None
        args.block_size_used = engine_block_size(loaded.engine, asked=args.block_size)
        context = loaded.engine.prompt_builder.context_tokens
        spy = PromptSpy(loaded.engine)
        worker = await loaded.start_worker(settings=worker_settings)
        print(
            f"engine loaded in {loaded.load_s:.1f} s; block size {args.block_size_used}, "
            f"context {context} tokens",
            flush=True,
        )
        async with harness.chat_socket() as ws:
            for repeat, trim_prefill in enumerate(arms(args.trim_prefill, args.repeats), 1):
                # off: this worker (in this process only) skips the trim prefill
                if trim_prefill:
                    vars(worker).pop("_prefill_next_trim", None)
                else:
                    setattr(worker, "_prefill_next_trim", lambda _active: None)  # noqa: B010
                records += await run_conversation(
                    ws=ws, spy=spy, args=args, repeat=repeat, trim_prefill=trim_prefill
                )
    return {"load_s": loaded.load_s, "context_tokens": context, "records": records}


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def long_markdown(
    args: argparse.Namespace, result: dict[str, Any], *, stamp: str, load: tuple[float, ...]
) -> str:
    records: list[TurnRecord] = result["records"]
    lines = [
        f"# long_conversation {stamp}",
        "",
        f"- machine: {harness.machine()}; load average (1/5/15 min) before {load[0]}, "
        f"after {load[1]}",
        f"- model: `{args.model_dir}` (loaded in {result['load_s']:.1f} s); context "
        f"{result['context_tokens']} tokens (`VLLM_MAX_MODEL_LEN`), KV block size "
        f"{args.block_size_used} ({'asked' if args.block_size else 'vLLM default'})",
        f"- {args.turns} user turns x {args.repeats} repeat(s), each repeat a new conversation "
        f"with a unique system prompt; greedy, max_tokens {args.max_tokens}; {args.gap:g} s "
        "idle before every turn (the user reading the answer); trim prefill "
        f"{args.trim_prefill}",
        f"- command: `{harness.command_line(module=MODULE)}`",
        "",
        "Per turn: tokens of the arm's first repeat; TTFT medians over the arm's repeats "
        "(client: send -> first `chat.delta`; worker: `timings.ttft_ms`). Goal = (previous "
        "prompt + previous answer) rounded down to the block size. Reusable = tokens this prompt "
        "shares from the start with the previous prompt + the tokens the model generated for it "
        "(the most a prefix cache can reuse). A miss is `boundary` (only the block of the last "
        "answer token, which never enters the KV cache), `re-rendered` (the cache held every "
        "whole block of the reusable tokens: the stored answer re-renders to other tokens than "
        "were generated) or `cache` (vLLM had less).",
    ]
    for arm in sorted({r.trim_prefill for r in records}, reverse=True):
        lines += _turn_table(
            [r for r in records if r.trim_prefill == arm],
            title=f"Trim prefill {'on' if arm else 'off'}",
        )
    lines += ["", "## Goals", ""]
    for repeat in range(1, args.repeats + 1):
        mine = [r for r in records if r.repeat == repeat]
        checked = [r for r in mine if r.goal_met is not None]
        missed = [f"{r.turn} ({r.miss_cause})" for r in checked if not r.goal_met]
        trims = [r.turn for r in mine if r.trimmed]
        lines.append(
            f"- repeat {repeat}: cache goal met at {len(checked) - len(missed)}/{len(checked)} "
            f"checked turns; missed at {', '.join(missed) or 'none'}; trim turns "
            f"{trims or 'none'}"
        )
    lines += [
        "",
        f"No trim cliff: every trim turn's client TTFT against the median of the ordinary turns "
        f"up to {TRIM_NEIGHBOURS} on each side (goal <= {TRIM_TTFT_GOAL_RATIO}x):",
        "",
        "| repeat | trim prefill | turn | prompt | cached | TTFT (ms) | around (ms) | ratio "
        "| met |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for cliff in trim_cliffs(records):
        lines.append(
            f"| {cliff.repeat} | {'on' if cliff.trim_prefill else 'off'} | {cliff.turn} | "
            f"{cliff.prompt_tokens} | {cliff.cached_prompt_tokens} | {cliff.ttft_ms:.0f} | "
            f"{cliff.around_ms:.0f} | {cliff.ratio:.2f} | {'yes' if cliff.met else '**no**'} |"
        )
    for server in (False, True):
        goal = ttft_goal(
            [r for r in records if r.trim_prefill] or records,
            first_turn=2,
            last_turn=args.turns,
            server=server,
        )
        who = "worker" if server else "client"
        if goal is None:
            lines.append(f"- TTFT ({who}): not measurable")
            continue
        verdict = "met" if goal.met else "**missed**"
        lines.append(
            f"- TTFT ({who}) turn {goal.last_turn} / turn {goal.first_turn}: "
            f"{goal.last_ms:.0f} / {goal.first_ms:.0f} ms = {goal.ratio:.2f}x "
            f"(goal <= {TTFT_GOAL_RATIO}x): {verdict}"
        )
    return "\n".join(lines)


def _turn_table(records: Sequence[TurnRecord], *, title: str) -> list[str]:
    by_turn: dict[int, list[TurnRecord]] = {}
    for r in records:
        by_turn.setdefault(r.turn, []).append(r)
    lines = [
        "",
        f"### {title}",
        "",
        "| turn | user chars | prompt | cached | goal | met | reusable | answer | kept from | "
        "trim | TTFT client (ms) | TTFT worker (ms) |",
        "|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---:|---:|",
    ]
    for turn in sorted(by_turn):
        rows = by_turn[turn]
        first = rows[0]
        met = {True: "yes", False: f"**no** ({first.miss_cause})", None: "-"}[first.goal_met]
        client = harness.values_of(rows, attr="ttft_s", scale=1000.0)
        worker = harness.values_of(rows, attr="server_ttft_ms")
        lines.append(
            f"| {turn} | {first.user_chars} | {first.prompt_tokens} | "
            f"{first.cached_prompt_tokens} | {_fmt(first.expected_cached)} | {met} | "
            f"{_fmt(first.reusable_tokens)} | {first.completion_tokens} | "
            f"{_fmt(first.kept_from)} | {'yes' if first.trimmed else ''} | "
            f"{_fmt(harness.median(client))} | {_fmt(harness.median(worker))} |"
        )
    return lines


def main_long(args: argparse.Namespace) -> int:
    extra = {"VLLM_MAX_MODEL_LEN": str(args.max_model_len), "CHAT_USER_RATE": "100000"}
    if args.block_size:
        extra["VLLM_BLOCK_SIZE"] = str(args.block_size)
    before = harness.load_average()[0]
    with harness.fresh_app(
        prefix="long_conversation-",
        model_dir=args.model_dir,
        cache_dir=args.cache_dir.resolve(),
        extra_env=extra,
    ):
        result = asyncio.run(run_long(args))
    after = harness.load_average()[0]
    stamp = harness.timestamp()
    text = long_markdown(args, result, stamp=stamp, load=(before, after))
    print("\n" + text, flush=True)
    records: list[TurnRecord] = result["records"]
    goals = {
        str(server): asdict(g) | {"ratio": g.ratio, "met": g.met}
        for server in (False, True)
        if (
            g := ttft_goal(
                [r for r in records if r.trim_prefill] or records,
                first_turn=2,
                last_turn=args.turns,
                server=server,
            )
        )
    }
    report = harness.report_base(stamp=stamp, model_dir=args.model_dir, module=MODULE) | {
        "turns": args.turns,
        "repeats": args.repeats,
        "max_tokens": args.max_tokens,
        "max_model_len": args.max_model_len,
        "block_size": args.block_size_used,
        "block_size_asked": args.block_size,
        "gap_s": args.gap,
        "load_average_before_after": [before, after],
        "engine_load_s": result["load_s"],
        "ttft_goal": {"client" if k == "False" else "worker": v for k, v in goals.items()},
        "trim_prefill": args.trim_prefill,
        "trim_cliffs": [asdict(c) | {"ratio": c.ratio, "met": c.met} for c in trim_cliffs(records)],
        "records": [r.to_json() for r in records],
    }
    harness.write_results(name="long_conversation", stamp=stamp, markdown=text, report=report)
    return 0


# ---- --compare-models ----------------------------------------------------------------------

COMPARE_SYSTEM = (
    "You are the customer-service assistant of ShopCo, an online store for clothing, shoes and "
    "home goods. Answer the customer's question helpfully and politely."
)
STORY_REQUEST = "Write a long story about a lighthouse keeper."
CODE_REQUEST = (
    "Write a Python function that checks whether a string is a palindrome, with an example."
)


def compare_prompts() -> list[tuple[str, str]]:
    """(kind, text): 5 ordinary customer-service questions, the story and the code request."""
    questions = [("question", q) for q in harness.SUPPORT_QUESTIONS[:5]]
    return [*questions, ("story", STORY_REQUEST), ("code", CODE_REQUEST)]


@dataclass(kw_only=True)
class CompareRecord:
    model: str
    kind: str
    prompt: str
    ttft_s: float | None
    server_ttft_ms: float | None
    total_s: float
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str | None
    answer: str

    @property
    def decode_tok_s(self) -> float | None:
        if self.ttft_s is None or not self.completion_tokens or self.completion_tokens < 2:
            return None
        span = self.total_s - self.ttft_s
        return (self.completion_tokens - 1) / span if span > 0 else None

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"decode_tok_s": self.decode_tok_s}


async def run_compare_child(args: argparse.Namespace) -> dict[str, Any]:
    from inference.settings import WorkerSettings

    worker_settings = WorkerSettings.from_env()
    records: list[CompareRecord] = []
    async with harness.loaded_engine(worker_settings=worker_settings) as loaded:
        await loaded.start_worker(settings=worker_settings)
        template = await publish_template(
            name="compare-models",
            system_prompt=COMPARE_SYSTEM,
            max_tokens=args.compare_max_tokens,
        )
        async with harness.chat_socket() as ws:
            await asyncio.sleep(args.gap)
            await send(ws, template.first_frame("Hello, are you there?"))  # warm-up, unmeasured
            for kind, text in compare_prompts():
                await asyncio.sleep(args.gap)
                answer = await send(ws, template.first_frame(text))
                reply = answer.reply
                record = CompareRecord(
                    model=args.model_dir.name,
                    kind=kind,
                    prompt=text,
                    ttft_s=reply.ttft_s,
                    server_ttft_ms=reply.server_ttft_ms,
                    total_s=reply.total_s,
                    prompt_tokens=reply.prompt_tokens,
                    completion_tokens=reply.completion_tokens,
                    finish_reason=answer.finish_reason,
                    answer=reply.answer,
                )
                records.append(record)
                print(
                    f"[{record.model}] {kind}: TTFT {_fmt((record.ttft_s or math.nan) * 1000)} ms"
                    f", {record.completion_tokens} tokens, {_fmt(record.decode_tok_s, 1)} tok/s",
                    flush=True,
                )
    return {"model": args.model_dir.name, "load_s": loaded.load_s, "records": records}


def main_compare_child(args: argparse.Namespace) -> int:
    with harness.fresh_app(
        prefix="compare-models-",
        model_dir=args.model_dir,
        cache_dir=args.cache_dir.resolve(),
        extra_env={"CHAT_USER_RATE": "100000"},
    ):
        result = asyncio.run(run_compare_child(args))
    out = {
        "model": result["model"],
        "model_dir": str(args.model_dir),
        "load_s": result["load_s"],
        "records": [r.to_json() for r in result["records"]],
    }
    Path(args.compare_child).write_text(json.dumps(out, ensure_ascii=False), encoding="utf-8")
    return 0


def compare_markdown(
    args: argparse.Namespace,
    models: Sequence[dict[str, Any]],
    *,
    stamp: str,
    load: Sequence[tuple[float, float, float]],
) -> str:
    lines = [
        f"# long_conversation --compare-models {stamp}",
        "",
        f"- machine: {harness.machine()}; load average (1/5/15 min) before {load[0]}, "
        f"after {load[-1]}",
        f"- command: `{harness.command_line(module=MODULE)}`",
        "- fairness: one engine at a time (each model in its own child process, started after "
        "the previous one ended), the same template (system prompt) and prompts, greedy, "
        f"max_tokens {args.compare_max_tokens}, one unmeasured warm-up request, {args.gap:g} s "
        "idle before every request; each model keeps its own stop rules (Gemma's "
        "generation_config.json stops at the end of the answer line)",
        "",
        "| model | request | TTFT client (ms) | TTFT worker (ms) | decode tok/s | answer "
        "tokens | answer chars | finish | prompt tokens |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for model in models:
        for r in model["records"]:
            lines.append(
                f"| {model['model']} | {r['kind']}: {r['prompt'][:40]} | "
                f"{_fmt(r['ttft_s'] * 1000 if r['ttft_s'] is not None else None)} | "
                f"{_fmt(r['server_ttft_ms'])} | {_fmt(r['decode_tok_s'], 1)} | "
                f"{r['completion_tokens']} | {len(r['answer'])} | {r['finish_reason']} | "
                f"{r['prompt_tokens']} |"
            )
    lines += ["", "Medians over the 7 requests:", ""]
    for model in models:
        rows = model["records"]
        ttft = [r["ttft_s"] * 1000 for r in rows if r["ttft_s"] is not None]
        rate = [r["decode_tok_s"] for r in rows if r["decode_tok_s"] is not None]
        length = [float(r["completion_tokens"] or 0) for r in rows]
        lines.append(
            f"- {model['model']} (loaded in {model['load_s']:.1f} s): TTFT "
            f"{_fmt(harness.median(ttft))} ms, decode {_fmt(harness.median(rate), 1)} tok/s, "
            f"answer {_fmt(harness.median(length))} tokens"
        )
    lines += ["", "## First 200 characters of every answer, verbatim", ""]
    for model in models:
        for r in model["records"]:
            # four backticks: an answer may hold a ``` fence of its own
            lines += [f"**{model['model']}, {r['kind']}** ({r['prompt']}):", "", "````text"]
            lines += [r["answer"][:200], "````", ""]
    return "\n".join(lines)


def main_compare(args: argparse.Namespace) -> int:
    models: list[dict[str, Any]] = []
    before = harness.load_average()
    for model_dir in args.models:
        with tempfile.TemporaryDirectory(prefix="compare-models-") as tmp:
            out = Path(tmp) / "out.json"
            command = [
                sys.executable,
                "-m",
                MODULE,
                "--compare-child",
                str(out),
                "--model-dir",
                str(model_dir),
                "--cache-dir",
                str(args.cache_dir),
                "--compare-max-tokens",
                str(args.compare_max_tokens),
                "--gap",
                str(args.gap),
            ]
            print(f"\n==> {model_dir.name}", flush=True)
            done = subprocess.run(command, cwd=harness.REPO_ROOT, env=dict(os.environ), check=False)
            if done.returncode != 0 or not out.is_file():
                print(f"error: {model_dir.name} failed (exit {done.returncode})", flush=True)
                continue
            models.append(json.loads(out.read_text(encoding="utf-8")))
    stamp = harness.timestamp()
    load = (before, harness.load_average())
    text = compare_markdown(args, models, stamp=stamp, load=load)
    print("\n" + text, flush=True)
    report = harness.report_base(stamp=stamp, model_dir=args.models[0], module=MODULE) | {
        "load_average_before_after": load,
        "max_tokens": args.compare_max_tokens,
        "gap_s": args.gap,
        "models": models,
    }
    harness.write_results(
        name="long_conversation_models",
        stamp=stamp,
        markdown=text,
        report=report,
        ensure_ascii=False,
    )
    return 0 if len(models) == len(args.models) else 1


# ---- command line --------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    harness.add_engine_args(parser)
    parser.add_argument("--turns", type=int, default=40, help="user turns (default 40)")
    parser.add_argument(
        "--max-tokens", type=int, default=64, help="fixed answer budget per turn (64)"
    )
    parser.add_argument(
        "--max-model-len",
        type=int,
        default=2048,
        help="the engine's context (VLLM_MAX_MODEL_LEN; default 2048, so 40 turns trim)",
    )
    parser.add_argument(
        "--block-size",
        type=int,
        default=None,
        help="KV cache block size (VLLM_BLOCK_SIZE; default the engine's: 32 on CPU)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="conversations (default 3)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the pasted logs")
    parser.add_argument(
        "--trim-prefill",
        choices=("on", "off", "both"),
        default="on",
        help="the worker prefills the next turn's trimmed prompt when an answer ends (on, the "
        "product's way), not (off), or both, alternating by repeat (default on)",
    )
    parser.add_argument(
        "--compare-models",
        action="store_true",
        help="instead: TTFT, tokens/s and answers of several models on the same 7 requests",
    )
    parser.add_argument(
        "--models",
        default=None,
        help="comma-separated model folders for --compare-models "
        "(default data/models/smollm2-135m-instruct)",
    )
    parser.add_argument("--compare-max-tokens", type=int, default=256)
    parser.add_argument("--compare-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.turns < 2 or args.repeats < 1:
        parser.error("--turns must be >= 2 and --repeats >= 1")
    if not 1 <= args.max_tokens <= 4096 or not 1 <= args.compare_max_tokens <= 4096:
        parser.error("--max-tokens and --compare-max-tokens must be 1..4096")
    if args.block_size is not None and (args.block_size < 1 or args.block_size % 16):
        parser.error("--block-size must be a positive multiple of 16 (CPU: of 32)")
    args.model_dir = args.model_dir.resolve()
    if args.models is None:
        models_dir = harness.REPO_ROOT / "data" / "models"
        args.models = [models_dir / "smollm2-135m-instruct"]
    else:
        args.models = [Path(m.strip()).resolve() for m in args.models.split(",") if m.strip()]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for folder in args.models if args.compare_models else [args.model_dir]:
        if not (folder / "config.json").is_file():
            print(f"{folder} is not a prepared model folder (python -m modelprep)")
            return 2
    if args.compare_child:
        return main_compare_child(args)
    if args.compare_models:
        return main_compare(args)
    return main_long(args)


if __name__ == "__main__":
    sys.exit(main())
