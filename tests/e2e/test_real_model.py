"""The chat page in Chromium on the real default model (SmolLM2 135M Instruct on vLLM's CPU
build), rendered with its own chat template: answers have paragraphs, lists and code, stream
over many paints, and code comes out as a highlighted block.

The model samples (its generation_config.json: temperature 0.2), so the tests assert what an
instruct model reliably does with these requests, not exact text.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api", reason="pip install playwright (a dev dependency)")

from playwright.sync_api import expect

from inference.models import ModelNotReadyError, ensure_model_ready, smollm2_model_dir
from inference.settings import data_dir_from_env
from tests.e2e.support import AppOptions, Tab, needs_chromium, text_of

pytestmark = [pytest.mark.e2e, pytest.mark.vllm, needs_chromium]

MODEL_DIR = smollm2_model_dir(data_dir=data_dir_from_env())
ANSWER_TIMEOUT_MS = 120_000  # 512 tokens at ~20-50 tok/s on a shared 2-core machine


def _model_ready() -> bool:
    try:
        ensure_model_ready(model_dir=MODEL_DIR)
    except ModelNotReadyError:
        return False
    return True


if not _model_ready():
    pytest.skip(
        "run `python -m modelprep prepare --model smollm2` (make test does)",
        allow_module_level=True,
    )

APP = AppOptions(
    faq=False,
    env={
        "INFERENCE_ENGINE": "vllm",
        "MODEL": str(MODEL_DIR),
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_MAX_MODEL_LEN": "2048",
        "VLLM_MAX_NUM_SEQS": "4",
        # share the session's compile caches: the app's own data dir is a fresh one
        "VLLM_CACHE_ROOT": str(data_dir_from_env() / "cache" / "vllm"),
        "CHAT_MAX_TOKENS": os.environ.get("E2E_MAX_TOKENS", "400"),
    },
    ready_timeout_s=240,
)

# Every animation frame, note how long the newest answer's text is (installed before asking).
_COUNT_PAINTS = """() => {
  window.__lengths = [];
  const tick = () => {
    const answers = document.querySelectorAll('[data-role="assistant"]');
    const last = answers[answers.length - 1];
    if (last) window.__lengths.push((last.textContent || '').length);
    window.__painting = requestAnimationFrame(tick);
  };
  tick();
}"""


def _painted_lengths(tab: Tab) -> list[int]:
    lengths: Any = tab.page.evaluate(
        "() => { cancelAnimationFrame(window.__painting); return window.__lengths; }"
    )
    return [int(n) for n in lengths]


def test_a_code_request_renders_a_highlighted_code_block(tab: Tab) -> None:
    answer = tab.ask(
        "Write a Python function that checks whether a string is a palindrome, with an example."
    )
    expect(answer).to_have_attribute("data-status", "complete", timeout=ANSWER_TIMEOUT_MS)
    code = answer.locator("pre code")
    expect(code.first).to_be_visible()
    assert "def " in code.first.inner_text()
    # highlight.js marked it up: keywords are spans with its classes, never raw HTML from text
    assert code.first.locator("span[class^='hljs-']").count() > 0
    tab.shoot("real-model-code")


def test_a_story_streams_hundreds_of_characters_over_many_paints(tab: Tab) -> None:
    tab.page.evaluate(_COUNT_PAINTS)
    answer = tab.ask("Write a long story about a lighthouse keeper.")
    expect(answer).to_have_attribute("data-status", "complete", timeout=ANSWER_TIMEOUT_MS)
    story = text_of(answer)
    assert len(story) >= 300, story
    assert "lighthouse" in story.lower()
    growth = sorted(set(_painted_lengths(tab)))
    # it appeared piece by piece: many distinct lengths painted on the way to the whole
    assert len(growth) >= 20, growth
