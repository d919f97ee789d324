"""The scripted test engine's own contract where tests rely on it: a migrated answer goes on
after the words already said, also when they were all said."""

from __future__ import annotations

from inference.engines.base import EngineRequest
from inference.engines.scripted import ScriptedEngine
from inference.models.chat_templates import CHATML_END, CHATML_START


def request(prompt: str) -> EngineRequest:
    return EngineRequest(
        request_id="r",
        prompt=prompt,
        prompt_token_ids=list(range(len(prompt.split()))),
        max_tokens=64,
        temperature=0.0,
        top_p=1.0,
        stop=(),
    )


def prompt(question: str, said: str) -> str:
    return f"{CHATML_START}user\n{question}{CHATML_END}\n{CHATML_START}assistant\n{said}"


async def collect(engine: ScriptedEngine, text: str) -> list[str]:
    return [d.text async for d in engine.stream(request(text))]


async def test_a_migrated_answer_goes_on_after_what_was_said() -> None:
    engine = ScriptedEngine()
    assert await collect(engine, prompt("one two", "You said:")) == [" one", " two"]


async def test_a_migrated_answer_already_all_said_just_ends() -> None:
    # the worker died after the last word and before its end: nothing is left to say
    # (a rolling-restart run in CI once raised IndexError here)
    engine = ScriptedEngine()
    assert await collect(engine, prompt("one two", "You said: one two")) == [""]
