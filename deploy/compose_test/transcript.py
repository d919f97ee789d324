"""Each step of the compose test with its time, printed as it ends (the issue's transcript)."""

import contextlib
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Step:
    name: str
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"           {text}", flush=True)


@dataclass
class Transcript:
    started: float = field(default_factory=time.monotonic)
    steps: list[Step] = field(default_factory=list)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[Step]:
        step = Step(name)
        self.steps.append(step)
        print(f"[{self.elapsed():7.1f} s] {name} ...", flush=True)
        began = time.monotonic()
        try:
            yield step
        except BaseException:
            step.seconds = time.monotonic() - began
            print(f"[{self.elapsed():7.1f} s] {name}: FAILED ({step.seconds:.1f} s)", flush=True)
            raise
        step.seconds = time.monotonic() - began
        print(f"[{self.elapsed():7.1f} s] {name}: ok ({step.seconds:.1f} s)", flush=True)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def summary(self) -> str:
        rows = [f"| {s.name} | {s.seconds:.1f} s | {'; '.join(s.notes)} |" for s in self.steps]
        total = f"| total | {self.elapsed():.1f} s | |"
        return "\n".join(["| step | time | notes |", "|---|---:|---|", *rows, total])


def fail(message: str) -> None:
    """Stop the test with a message an operator can act on."""
    print(f"compose test: {message}", file=sys.stderr, flush=True)
    raise SystemExit(1)
