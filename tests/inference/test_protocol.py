from __future__ import annotations

import pytest
from pydantic import ValidationError

from inference.wire.protocol import ChatTurn, Delta, GenerateRequest, worker_event_adapter


def test_events_round_trip_through_channel_dicts() -> None:
    event = Delta(request_id="r", seq=3, text="héllo 👋", tokens=2)
    assert worker_event_adapter.validate_python(event.to_channel()) == event


def test_generate_requests_need_a_reply_channel() -> None:
    with pytest.raises(ValidationError):
        GenerateRequest.model_validate(
            {
                "type": "inference.generate",
                "request_id": "r",
                "messages": [],
                "submitted_at": 0,
            }
        )
    with pytest.raises(ValidationError):
        ChatTurn.model_validate({"role": "system", "content": "sneaky"})
