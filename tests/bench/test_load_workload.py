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
from bench.prompts import BenchSampling
from inference.chat_prompt import ChatTemplate, RenderedChat
from inference.generation_config import GenerationDefaults
from inference.models.chat_templates import CHATML_TEMPLATE
from inference.prompt_builder import PromptBuilder
from inference.wire.protocol import ChatTurn


def words(rendered: RenderedChat) -> list[int]:
    # a stand-in tokenizer: one "token" per whitespace-separated word, its id a hash
    return [hash(word) % 50_000 for word in rendered.text.split()]


BUILDER = PromptBuilder(
    template=ChatTemplate(source=CHATML_TEMPLATE),
    encode=words,
    count=lambda text: len(text.split()),
    context_tokens=4096,
)
SAMPLING = BenchSampling.of_defaults(
    GenerationDefaults(temperature=0.2, top_p=0.9, repetition_penalty=1.1, stop=("\n\n",)),
    max_tokens=32,
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
        expected = BUILDER.build(
            system=item.system,
            messages=[ChatTurn(role="user", content=item.text)],
            max_tokens=32,
            trim=True,
        )
        assert item.prompt(BUILDER, max_tokens=32) == expected
    templated = [item for item in items if item.kind == "template"]
    assert len(templated) >= 2
    # the system block alone (a warm-up's prompt) is the first tokens of every templated prompt
    block = BUILDER.build(system=TEMPLATE.system_prompt, messages=[], max_tokens=1, trim=False)
    for item in templated:
        ids = item.prompt(BUILDER, max_tokens=32).token_ids
        assert ids[: len(block.token_ids)] == block.token_ids
    assert len({item.text for item in templated}) > 1  # different values, not one prompt
    assert templated[0].chat_messages()[0] == {"role": "system", "content": TEMPLATE.system_prompt}
    free = next(item for item in items if item.kind == "free")
    assert free.system is None  # the model's own default system text, on both sides
    assert free.chat_messages() == [{"role": "user", "content": free.text.strip()}]


def test_the_run_sampling_is_the_models_defaults_sent_explicitly() -> None:
    assert SAMPLING.template_sampling() == {
        "max_tokens": 32,
        "temperature": 0.2,
        "top_p": 0.9,
        "repetition_penalty": 1.1,
    }
    assert SAMPLING.openai_fields(vllm=True) == {
        "max_tokens": 32,
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": -1,
        "repetition_penalty": 1.1,
        "stop": ["\n\n"],
    }
    # our API refuses vLLM's extensions and applies the model's stops itself
    assert SAMPLING.openai_fields(vllm=False) == {
        "max_tokens": 32,
        "temperature": 0.2,
        "top_p": 0.9,
    }
    # a greedy model (do_sample false) is sent temperature 0: vLLM ignores do_sample
    greedy = GenerationDefaults.from_json({"do_sample": False, "temperature": 0.7})
    assert BenchSampling.of_defaults(greedy).openai_fields(vllm=True)["temperature"] == 0.0
    assert BenchSampling.of_defaults(greedy).max_tokens == greedy.max_tokens


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
        base_url="http://127.0.0.1:9", model="m", api="chat", sampling=SAMPLING, vllm=True
    )
    completions = OpenAIClient(
        base_url="http://127.0.0.1:9",
        model="m",
        api="completions",
        sampling=SAMPLING,
        vllm=True,
        prompt_of=lambda item: item.prompt(BUILDER, max_tokens=32).text,
    )
    ours = OpenAIClient(
        base_url="http://127.0.0.1:9",
        model="m",
        api="chat",
        sampling=SAMPLING,
        vllm=False,
        template_id=7,
    )
    try:
        body = vllm.body(templated)
        assert body["messages"] == templated.chat_messages()
        assert (body["max_tokens"], body["temperature"], body["stop"]) == (32, 0.2, ["\n\n"])
        assert body["repetition_penalty"] == 1.1
        assert body["stream"] is True
        assert completions.body(faq)["prompt"] == faq.prompt(BUILDER, max_tokens=32).text
        chat = ours.body(templated)
        assert chat["template"] == {"id": 7, "variables": dict(templated.variables or {})}
        assert chat["messages"] == []
        assert "stop" not in chat  # the app applies the model's stops itself
        assert "repetition_penalty" not in chat
        assert ours.body(faq)["messages"] == [{"role": "user", "content": faq.text}]
    finally:
        await vllm.close()
        await completions.close()
        await ours.close()
