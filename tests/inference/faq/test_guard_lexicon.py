"""The guard's vocabulary is data an operator can replace (FAQ_GUARD_LEXICON), not Python.

The guard reads it once per process, so each case runs in a fresh interpreter, as a worker
started with the variable would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inference.faq.matcher import LEXICON_PATH, load_lexicon

ASK = (
    "from inference.faq.matcher import lexical_guard as g; "
    "r = g(query='How do I annul my order?', phrasing='How do I cancel my order?'); "
    "print(r.passed, r.reason)"
)


def run_guard(lexicon: Path | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FAQ_GUARD_LEXICON"}
    if lexicon is not None:
        env["FAQ_GUARD_LEXICON"] = str(lexicon)
    return subprocess.run(
        [sys.executable, "-c", ASK], env=env, capture_output=True, text=True, timeout=60
    )


def test_an_operators_lexicon_changes_what_the_guard_accepts(tmp_path: Path) -> None:
    packaged = run_guard(None)
    assert packaged.stdout.startswith("False"), packaged.stderr  # "annul": an unknown word

    data = json.loads(LEXICON_PATH.read_text(encoding="utf-8"))
    data["actions"]["cancel"].append("annul")
    mine = tmp_path / "lexicon.json"
    mine.write_text(json.dumps(data), encoding="utf-8")
    operator = run_guard(mine)
    assert operator.stdout.startswith("True"), operator.stderr


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("negations"), "missing negations"),
        (lambda d: d["objects"].update(order="parcel"), "objects.order must be a list of words"),
        (lambda d: d["phrases"].append(["(unclosed", " x "]), "phrases:"),
        (lambda d: d["axes"].append([["on"]]), "each of axes must be"),
    ],
)
def test_a_broken_lexicon_is_refused_naming_the_part(
    tmp_path: Path, change: Callable[[dict[str, Any]], object], message: str
) -> None:
    data = json.loads(LEXICON_PATH.read_text(encoding="utf-8"))
    change(data)
    broken = tmp_path / "lexicon.json"
    broken.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=message) as raised:
        load_lexicon(broken)
    assert str(broken) in str(raised.value)


def test_a_word_in_two_concepts_is_refused_when_the_guard_starts(tmp_path: Path) -> None:
    data = json.loads(LEXICON_PATH.read_text(encoding="utf-8"))
    data["objects"]["cart"].append("password")  # already the object "password"
    broken = tmp_path / "lexicon.json"
    broken.write_text(json.dumps(data), encoding="utf-8")
    started = run_guard(broken)
    assert started.returncode != 0
    assert "'password' is in two concepts" in started.stderr
