"""An answer's beginning: what the worker drops before the first text, and what it keeps."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from channels.layers import InMemoryChannelLayer

from inference.answering import answer_start
from inference.engines.base import EngineDelta, EngineRequest
from inference.engines.scripted import ScriptedEngine
from inference.wire.protocol import (
    worker_event_adapter,
)
from inference.wire.transport import Transport
from inference.worker import InferenceWorker
from tests.inference.worker_events import ask, running
from tests.support.workers import worker_settings


@pytest.mark.parametrize(
    ("text", "sent"),
    [
        ("    code()", "    code()"),  # an indented code line keeps its four spaces
        ("  - item", "  - item"),  # a nested list item keeps its indent
        ("\tcell", "\tcell"),
        ("\n    code()", "    code()"),  # a blank line before it goes, the indent stays
        (" \n  - item", "  - item"),
        (" Hello", "Hello"),  # SentencePiece's space before the first word goes
        ("\nHello", "Hello"),  # as does a template's newline after the assistant header
        ("\n\nHello", "Hello"),
        ("\r\nHello", "Hello"),
        ("Hello", "Hello"),
        ("Hello  world ", "Hello  world "),  # only the beginning is touched
    ],
)
def test_an_answers_beginning_keeps_indentation_and_drops_blank_lines(text: str, sent: str) -> None:
    assert answer_start(text) == sent


@pytest.mark.parametrize("text", ["", " ", "\n", " \n\t"])
def test_only_whitespace_is_held_until_the_first_text(text: str) -> None:
    assert answer_start(text) is None


class _Pieces(ScriptedEngine):
    """Says the given pieces, one delta each, whatever it is asked."""

    def __init__(self, pieces: list[str]) -> None:
        super().__init__()
        self.pieces = pieces

    async def stream(self, request: EngineRequest) -> AsyncIterator[EngineDelta]:
        for index, text in enumerate(self.pieces):
            await asyncio.sleep(0.02)  # longer than the coalescing interval: one delta each
            yield EngineDelta(
                text=text,
                tokens=1,
                finish_reason="stop" if index == len(self.pieces) - 1 else None,
                prompt_tokens=3,
                cached_prompt_tokens=0,
            )


async def _answer(pieces: list[str]) -> str:
    layer = InMemoryChannelLayer()
    worker = InferenceWorker(
        engine=_Pieces(pieces), transport=Transport(layer=layer), settings=worker_settings()
    )
    async with running(worker):
        reply = await ask(layer, "show me")
        text = ""
        while True:
            event = worker_event_adapter.validate_python(
                await asyncio.wait_for(layer.receive(reply), 5)
            )
            if event.type == "inference.delta":
                text += event.text
            elif event.type == "inference.done":
                return text
            else:
                assert event.type in ("inference.accepted", "inference.heartbeat"), event


@pytest.mark.parametrize(
    ("pieces", "answer"),
    [
        (["    x = 1", "\n    y = 2"], "    x = 1\n    y = 2"),
        (["  - item", "\n  - more"], "  - item\n  - more"),
        # whitespace alone in the first deltas is held, then judged with the text after it
        (["\n", "    ", "code()"], "    code()"),
        ([" ", "Hello", " there"], "Hello there"),
        (["\n", "Hello"], "Hello"),
    ],
)
async def test_the_streamed_answer_starts_as_the_model_wrote_it(
    pieces: list[str], answer: str
) -> None:
    assert await _answer(pieces) == answer
