"""Sampling for a request: the request's values where it gives them, the model's own
defaults (generation_config.json) otherwise; stop strings from both."""

from __future__ import annotations

import json
import time
from pathlib import Path

from inference.engine_request import engine_request_of
from inference.engines.scripted import ScriptedEngine
from inference.generation_config import GenerationDefaults
from inference.wire.protocol import ChatTurn, GenerateRequest, SamplingOptions

SMOLLM2_LIKE = {
    "do_sample": True,
    "temperature": 0.2,
    "top_p": 0.9,
    "repetition_penalty": 1.1,
    "max_new_tokens": 512,
}


def _request(**sampling: object) -> GenerateRequest:
    return GenerateRequest(
        request_id="r1",
        reply_channel="reply",
        messages=[ChatTurn(role="user", content="Where is my order?")],
        sampling=SamplingOptions.model_validate(sampling),
        submitted_at=time.time(),
    )


def test_the_models_generation_config_gives_the_defaults(tmp_path: Path) -> None:
    (tmp_path / "generation_config.json").write_text(json.dumps(SMOLLM2_LIKE))
    defaults = GenerationDefaults.from_model_dir(tmp_path)
    built = engine_request_of(
        _request(), builder=ScriptedEngine().prompt_builder, defaults=defaults
    )
    assert (built.temperature, built.top_p, built.repetition_penalty) == (0.2, 0.9, 1.1)
    assert built.max_tokens == 512  # hundreds of tokens: room for a real answer


def test_a_request_overrides_field_by_field_and_adds_stop_strings() -> None:
    defaults = GenerationDefaults.from_json({**SMOLLM2_LIKE, "stop_strings": ["\nCustomer:"]})
    built = engine_request_of(
        _request(temperature=0.0, max_tokens=40, stop=["END"]),
        builder=ScriptedEngine().prompt_builder,
        defaults=defaults,
    )
    assert built.temperature == 0.0
    assert built.top_p == 0.9  # not asked: the model's
    assert built.max_tokens == 40
    assert built.stop == ("\nCustomer:", "END")


def test_greedy_models_and_missing_or_broken_configs(tmp_path: Path) -> None:
    assert GenerationDefaults.from_json({"do_sample": False, "temperature": 0.9}).temperature == 0
    assert GenerationDefaults.from_model_dir(tmp_path) == GenerationDefaults()
    (tmp_path / "generation_config.json").write_text("{not json")
    assert GenerationDefaults.from_model_dir(tmp_path) == GenerationDefaults()
    odd = GenerationDefaults.from_json({"temperature": "hot", "max_new_tokens": -3})
    assert (odd.temperature, odd.max_tokens) == (1.0, 512)
