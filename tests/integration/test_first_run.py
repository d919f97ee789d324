"""A newcomer's first `make run` on a fresh data dir, with no FAQ verifier trained yet: the app is
Ready without waiting for it, the seeded FAQ examples answer exact repeats at once, the log
says so, and the verifier trained in the background is picked up without a restart.

The scripted engine stands in for the model (this is about the FAQ path and the process's
start). Training is off here (INFERENCE_FAQ_VERIFIER_TRAIN=0: minutes of CPU); the test puts
a trained folder where the worker looks, as another process would. The training child itself
is tested in tests/inference/faq/test_verifier_pickup.py.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from inference.models.paths import default_data_dir
from modelprep.faq_verifier import prepare_faq_verifier
from tests.integration.processes import (
    Served,
    app_served,
    chat_send,
    chat_socket,
    frames_until,
    local_env,
    login,
    manage_run,
)

PASSWORD = "first-run-pw-123"


async def ask(served: Served, session: str, text: str) -> dict[str, Any]:
    host = f"127.0.0.1:{served.port}"
    async with chat_socket(host, session) as ws:
        await ws.send(chat_send(text))
        frames = await frames_until(ws, "chat.done", timeout=30)
    assert frames[-1]["type"] == "chat.done", frames[-1]
    return frames[-1]


def wait_for_output(served: Served, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not any(text in line for line in served.output):
        assert time.monotonic() < deadline, f"never said {text!r}:\n{''.join(served.output)}"
        time.sleep(0.2)


@pytest.mark.timeout(240)
def test_a_first_run_is_ready_before_the_verifier_and_picks_it_up(
    tmp_path: Path,
) -> None:
    trained = prepare_faq_verifier(data_dir=default_data_dir(), progress=lambda _: None)
    env = local_env(
        tmp_path / "data",
        {
            "INFERENCE_FAQ_VERIFIER_TRAIN": "0",
            "INFERENCE_FAQ_VERIFIER_POLL_S": "0.5",
            "INFERENCE_ENGINE": "scripted",
            "DEMO_PASSWORD": PASSWORD,
        },
        dropped=["INFERENCE_FAQ_VERIFIER_DIR"],
    )
    manage_run(env, ["migrate", "--noinput"], ["demo_user"], ["seed_examples"])
    with app_served(env=env, ready_timeout=120) as served:
        wait_for_output(served, "exact repeats only until the verifier is ready", 60)
        session = login(f"127.0.0.1:{served.port}", PASSWORD)

        repeat = asyncio.run(ask(served, session, "where is my order"))
        assert repeat["source"] == "faq"  # the seeded example, before any verifier

        paraphrase = "Can you tell me where my order is?"
        before = asyncio.run(ask(served, session, paraphrase))
        assert before["source"] == "model"  # exact repeats only: no guessing meanwhile

        shutil.copytree(trained, tmp_path / "data" / "models" / "faq-verifier")
        wait_for_output(served, "FAQ verifier ready", 120)
        after = asyncio.run(ask(served, session, paraphrase))
        assert after["source"] == "faq"
        assert after["faq_entry_id"] == repeat["faq_entry_id"]
