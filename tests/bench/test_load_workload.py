"""The load benchmark's workload: reproducible, mixed as asked, prompts as the app builds them."""

from __future__ import annotations

import itertools
import statistics

import pytest

from bench.faq_ttft import FAQS
from bench.load.workload import (
    TEMPLATE,
    make_items,
    parse_mix,
    parse_numbers,
    point_seed,
    poisson_offsets,
)
from inference.prompt_format import PromptFormat
from inference.protocol import ChatTurn

FORMAT = PromptFormat(
    system="Default system text.",
    examples=[("Hi", "Hello! How can I help?")],
    user_prefix="Customer: ",
    assistant_prefix="Agent: ",
    turn_separator="\n",
    stop=["\n"],
    default_max_tokens=40,
)


def test_the_same_seed_gives_the_same_requests_and_arrivals() -> None:
    mix = parse_mix("faq=1,template=1,free=1")
    first = make_items(seed=7, count=30, mix=mix)
    again = make_items(seed=7, count=30, mix=mix)
    other = make_items(seed=point_seed(7, 1), count=30, mix=mix)
    assert [i.to_json() for i in first] == [i.to_json() for i in again]
    assert [i.text for i in first] != [i.text for i in other]
    assert poisson_offsets(seed=3, count=10, rate=2) == poisson_offsets(seed=3, count=10, rate=2)


def test_a_kind_with_weight_zero_never_appears_and_the_others_do() -> None:
    items = make_items(seed=1, count=60, mix=parse_mix("faq=1,template=0,free=1"))
    kinds = {item.kind for item in items}
    assert kinds == {"faq", "free"}


def test_faq_requests_are_paraphrases_of_a_seeded_entry_not_its_phrasings() -> None:
    items = make_items(seed=2, count=40, mix=parse_mix("faq=1"))
    for item in items:
        assert item.faq_index is not None
        faq = FAQS[item.faq_index]
        assert item.text in faq.paraphrases
        assert item.text not in (faq.question, *faq.alternates)


def test_prompts_are_what_the_worker_renders_and_templates_share_their_prefix() -> None:
    items = make_items(seed=3, count=40, mix=parse_mix("faq=1,template=1,free=1"))
    for item in items:
        expected = FORMAT.render([ChatTurn(role="user", content=item.text)], system=item.system)
        assert item.prompt(FORMAT) == expected
    templated = [item for item in items if item.kind == "template"]
    assert len(templated) >= 2
    shared = FORMAT.shared_prefix(TEMPLATE.system_prompt)
    assert all(item.prompt(FORMAT).startswith(shared) for item in templated)
    assert len({item.text for item in templated}) > 1  # different values, not one prompt
    assert templated[0].chat_messages()[0] == {"role": "system", "content": TEMPLATE.system_prompt}


def test_arrivals_offer_exactly_the_asked_rate_with_poisson_like_gaps() -> None:
    offsets = poisson_offsets(seed=5, count=41, rate=2.0)
    gaps = [b - a for a, b in itertools.pairwise(offsets)]
    assert offsets[0] == 0.0
    assert statistics.mean(gaps) == pytest.approx(0.5)
    assert min(gaps) < 0.25 < 1.0 < max(gaps)  # bursty, not evenly spaced


@pytest.mark.parametrize("raw", ["faq", "faq=x", "faq=-1", "chat=1", "faq=0,template=0,free=0", ""])
def test_a_bad_mix_is_refused_with_a_reason(raw: str) -> None:
    with pytest.raises(ValueError, match=r"mix|weight"):
        parse_mix(raw)


@pytest.mark.parametrize("raw", ["", "1,x", "0", "1,-2"])
def test_bad_rates_are_refused(raw: str) -> None:
    with pytest.raises(ValueError, match="--rates"):
        parse_numbers(raw, name="--rates")


async def test_openai_bodies_carry_the_apps_prompt_or_the_template_reference() -> None:
    from bench.load.clients import OpenAIClient

    items = make_items(seed=4, count=30, mix=parse_mix("faq=1,template=1"))
    faq = next(item for item in items if item.kind == "faq")
    templated = next(item for item in items if item.kind == "template")
    vllm = OpenAIClient(
        base_url="http://127.0.0.1:9",
        model="m",
        api="completions",
        prompt_of=lambda item: item.prompt(FORMAT),
        max_tokens=32,
        stop=FORMAT.stop,
    )
    ours = OpenAIClient(
        base_url="http://127.0.0.1:9",
        model="m",
        api="chat",
        prompt_of=lambda item: item.text,
        max_tokens=32,
        stop=[],
        template_id=7,
    )
    try:
        body = vllm.body(templated)
        assert body["prompt"] == templated.prompt(FORMAT)
        assert (body["max_tokens"], body["temperature"], body["stop"]) == (32, 0.0, ["\n"])
        assert body["stream"] is True
        chat = ours.body(templated)
        assert chat["template"] == {"id": 7, "variables": dict(templated.variables or {})}
        assert chat["messages"] == []
        assert "stop" not in chat  # the app applies the model's stops itself
        assert ours.body(faq)["messages"] == [{"role": "user", "content": faq.text}]
    finally:
        await vllm.close()
        await ours.close()
