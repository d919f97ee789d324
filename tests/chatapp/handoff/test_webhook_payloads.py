"""The webhook's golden examples (chatapp/handoff/webhook_examples.json): one per event, each
exactly what the declared schema accepts and sends, each shown in docs/handoff.md#webhook."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import ValidationError

from chatapp.handoff import states
from chatapp.handoff.webhook_outbox import CHANGE_PAYLOADS
from chatapp.handoff.webhook_payloads import EXAMPLES_PATH, EventName, payload_adapter

DOC = Path(__file__).resolve().parents[3] / "docs" / "handoff.md"
EXAMPLES: dict[str, dict[str, Any]] = json.loads(EXAMPLES_PATH.read_text(encoding="utf-8"))


def test_there_is_one_example_of_every_event() -> None:
    assert sorted(EXAMPLES) == sorted(get_args(EventName))
    assert all(example["event"] == name for name, example in EXAMPLES.items())


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_example_is_what_the_schema_accepts_and_sends(name: str) -> None:
    example = EXAMPLES[name]
    payload = payload_adapter.validate_python(example)
    assert payload_adapter.dump_python(payload, mode="json") == example


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_docs_show_each_example_as_it_is(name: str) -> None:
    shown = json.dumps(EXAMPLES[name], indent=2)
    assert f"```json\n{shown}\n```" in DOC.read_text(encoding="utf-8"), (
        f"docs/handoff.md#webhook does not show the {name} example of {EXAMPLES_PATH.name}"
    )


def test_the_schema_refuses_a_body_that_strays_from_it() -> None:
    claimed = dict(EXAMPLES["handoff.claimed"])
    with pytest.raises(ValidationError):
        payload_adapter.validate_python({**claimed, "surprise": 1})
    with pytest.raises(ValidationError):
        payload_adapter.validate_python({**claimed, "event": "handoff.unknown"})
    del claimed["agent"]
    with pytest.raises(ValidationError):
        payload_adapter.validate_python(claimed)


def test_every_change_a_handoff_records_has_its_event() -> None:
    assert set(CHANGE_PAYLOADS) == {*get_args(states.Action), "contact"}
