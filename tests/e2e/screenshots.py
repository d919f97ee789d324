"""Refresh docs/screenshots/: the login page, a chat with a streamed answer, the template
picker, and a FAQ answer with its label (1200x800 viewport, PNG).

    .venv/bin/python -m tests.e2e.screenshots [DIR]

Runs the browser tests that reach those views with E2E_SCREENSHOTS set; they save the views
as they pass (`Tab.shoot`). Needs what the e2e tests need: Chromium at /usr/bin/chromium.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VIEWS = [
    "tests/e2e/test_chat.py::test_a_question_streams_into_the_log_and_the_answer_shows_its_ttft",
    "tests/e2e/test_chat.py::test_a_templated_message_sends_variables_not_its_text",
    "tests/e2e/test_faq.py::test_a_faq_answer_is_labelled_and_the_assistant_can_answer_instead",
]


def main(argv: list[str]) -> int:
    target = Path(argv[0]).resolve() if argv else REPO / "docs" / "screenshots"
    env = {**os.environ, "E2E_SCREENSHOTS": str(target)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *VIEWS]
    code = subprocess.call(command, env=env, cwd=REPO)
    if code == 0:
        for png in sorted(target.glob("*.png")):
            print(f"{png}: {png.stat().st_size // 1024} KiB")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
