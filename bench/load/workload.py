"""What the load benchmark sends, and when: the request mix and seeded Poisson arrivals.

Three kinds of request, mixed by weight (`--mix faq=0.4,template=0.3,free=0.3`):

* `faq`: a paraphrase of one of the FAQ entries the bench seeds (`bench.faq_ttft.FAQS`,
  worded unlike any of the entry's phrasings), in a new conversation: the app's FAQ cache may
  answer it; vLLM's server always runs the model;
* `template`: a chat started from the template the bench publishes ("Account access" of
  `bench.template_bytes`, the longest system prompt, ~2,000 characters), a random e-mail as
  its variable: every one shares the template's system prompt as its prompt prefix;
* `free`: a long free-form message (a support ticket of 6-12 sentences,
  `bench.priority_ttft.ticket`) without a system prompt (the model's chat template adds its
  own default system text, if it has one): unique, so only that default prefix can come from
  the prefix cache.

Prompts are what the worker builds: the model's chat template over the item's system prompt
and message (`WorkItem.prompt` with the worker's `PromptBuilder`); a `/v1/chat/completions`
server gets the same messages (`WorkItem.chat_messages`) and renders the same template.

Everything here is pure: the same seed gives the same requests at the same offsets, whichever
configuration runs them.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bench.faq_ttft import FAQS
from bench.priority_ttft import ticket
from bench.template_bytes import TEMPLATES, TemplateSpec
from chatapp.prompts.rendering import parse_variables, render_body
from inference.prompt_builder import BuiltPrompt, PromptBuilder
from inference.wire.protocol import ChatTurn

Kind = Literal["faq", "template", "free"]
KINDS: tuple[Kind, ...] = ("faq", "template", "free")
DEFAULT_MIX: dict[Kind, float] = {"faq": 0.4, "template": 0.3, "free": 0.3}

TEMPLATE: TemplateSpec = max(TEMPLATES, key=lambda spec: len(spec.system_prompt))
TEMPLATE_NAME = f"Load bench: {TEMPLATE.name}"
FIRST_NAMES = ("maria", "jan", "chen", "amara", "lucas", "sofia", "omar", "ines", "yuki", "ravi")
LAST_NAMES = ("lopez", "muller", "wei", "okafor", "martin", "rossi", "haddad", "silva", "sato")
DOMAINS = ("example.com", "example.org", "mail.example.net", "beispiel.de")


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkItem:
    """One request: what the user types (or the template values), and for the report its kind."""

    index: int
    kind: Kind
    text: str  # the user message as the model sees it (a template's rendered body)
    variables: Mapping[str, str | int] | None = None  # template requests only
    faq_index: int | None = None  # faq requests: which of FAQS it paraphrases

    @property
    def system(self) -> str | None:
        """The system prompt the app uses for it: the template's, else the model's default."""
        return TEMPLATE.system_prompt if self.kind == "template" else None

    def turns(self) -> list[ChatTurn]:
        """The conversation the worker gets for it: one user turn."""
        return [ChatTurn(role="user", content=self.text)]

    def prompt(self, builder: PromptBuilder, *, max_tokens: int) -> BuiltPrompt:
        """The exact prompt (text and tokens) the app's worker gives the engine."""
        return builder.build(
            system=self.system, messages=self.turns(), max_tokens=max_tokens, trim=True
        )

    def chat_messages(self) -> list[dict[str, str]]:
        """The same request for a `/v1/chat/completions` server, which renders it with the
        same chat template. Contents are stripped as the worker strips them."""
        messages = (
            [] if self.system is None else [{"role": "system", "content": self.system.strip()}]
        )
        return [*messages, {"role": "user", "content": self.text.strip()}]

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "text": self.text,
            "variables": dict(self.variables) if self.variables is not None else None,
            "faq_index": self.faq_index,
        }


def parse_mix(raw: str) -> dict[Kind, float]:
    """`faq=0.4,template=0.3,free=0.3` -> weights (any non-negative numbers, not all zero)."""
    weights: dict[Kind, float] = dict.fromkeys(KINDS, 0.0)
    for part in raw.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in KINDS:
            raise ValueError(f"mix entries are kind=weight with kind in {', '.join(KINDS)}")
        try:
            weight = float(value)
        except ValueError as exc:
            raise ValueError(f"the weight of {name} must be a number, got {value!r}") from exc
        if weight < 0:
            raise ValueError(f"the weight of {name} must not be negative")
        weights[name] = weight
    if sum(weights.values()) <= 0:
        raise ValueError("at least one mix weight must be positive")
    return weights


def render_template(variables: Mapping[str, str | int]) -> str:
    """The template body with these values, as the server renders it."""
    declared = {v.name for v in parse_variables(list(TEMPLATE.variables))}
    return render_body(TEMPLATE.body, variables, declared=declared)


def _email(rng: random.Random) -> str:
    name = f"{rng.choice(FIRST_NAMES)}.{rng.choice(LAST_NAMES)}{rng.randint(1, 999)}"
    return f"{name}@{rng.choice(DOMAINS)}"


def make_item(rng: random.Random, *, index: int, kind: Kind) -> WorkItem:
    if kind == "faq":
        faq_index = rng.randrange(len(FAQS))
        text = rng.choice(FAQS[faq_index].paraphrases)
        return WorkItem(index=index, kind=kind, text=text, faq_index=faq_index)
    if kind == "template":
        fill = rng.choice(TEMPLATE.fills)
        values: dict[str, str | int] = {}
        for variable in TEMPLATE.variables:
            name = str(variable["name"])
            if name == "email":
                values[name] = _email(rng)
            elif variable.get("choices"):
                values[name] = rng.choice(variable["choices"])
            else:
                values[name] = fill[name]
        return WorkItem(index=index, kind=kind, text=render_template(values), variables=values)
    text = "Hello, I need help with an order. " + ticket(rng, sentences=(6, 12))
    return WorkItem(index=index, kind=kind, text=text)


def make_items(*, seed: int, count: int, mix: Mapping[Kind, float]) -> list[WorkItem]:
    """`count` requests drawn from the mix; the same seed always gives the same list."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible workload, not security
    kinds = [kind for kind in KINDS if mix.get(kind, 0) > 0]
    weights = [mix[kind] for kind in kinds]
    return [
        make_item(rng, index=i, kind=rng.choices(kinds, weights=weights)[0]) for i in range(count)
    ]


def poisson_offsets(*, seed: int, count: int, rate: float) -> list[float]:
    """Send times (s after the start) of `count` Poisson arrivals at `rate` per second.

    The gaps are exponential, then rescaled so that their mean is exactly 1/rate: with the few
    requests per point a CPU allows, raw draws would offer a rate 30 % off the nominal one
    either way, and the points of a sweep would not be comparable. The first request goes at 0.
    """
    if rate <= 0 or count < 1:
        raise ValueError("rate must be positive and count at least 1")
    rng = random.Random(seed)  # noqa: S311 - reproducible arrivals, not security
    gaps = [rng.expovariate(rate) for _ in range(count - 1)]
    if not gaps:
        return [0.0]
    scale = (len(gaps) / rate) / sum(gaps)
    offsets = [0.0]
    for gap in gaps:
        offsets.append(offsets[-1] + gap * scale)
    return offsets


def parse_numbers(raw: str, *, name: str) -> list[float]:
    """`0.25,0.5,1` -> [0.25, 0.5, 1.0], each positive."""
    try:
        values = [float(part) for part in raw.split(",") if part.strip()]
    except ValueError as exc:
        raise ValueError(f"{name} must be comma-separated numbers, got {raw!r}") from exc
    if not values or any(v <= 0 for v in values):
        raise ValueError(f"{name} must list positive numbers, got {raw!r}")
    return values


def point_seed(seed: int, point: int) -> int:
    """The seed of the `point`-th point of a sweep: distinct points, same across configs."""
    return seed * 1000 + point


def describe_mix(mix: Mapping[Kind, float]) -> str:
    total = sum(mix.values())
    return ", ".join(f"{kind} {mix.get(kind, 0) / total:.0%}" for kind in KINDS)


def kinds_count(items: Sequence[WorkItem]) -> dict[str, int]:
    return {kind: sum(1 for item in items if item.kind == kind) for kind in KINDS}
