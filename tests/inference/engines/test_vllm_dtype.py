"""The prepared folders hold bf16 weights; vLLM loads them in float32 too (it casts), which is
what a CPU without native bf16 gets. Real vLLM on the tiny model."""

from __future__ import annotations

import gc
import logging
import uuid
from pathlib import Path

import pytest

from inference.engines.base import EngineRequest
from inference.settings import EngineSettings

pytestmark = [pytest.mark.vllm, pytest.mark.asyncio(loop_scope="session")]


async def test_float32_loads_the_bf16_folder_and_generates(
    tiny_data_dir: Path, tiny_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("vllm")
    import torch

    from inference.engines.vllm import VllmEngine

    settings = EngineSettings(
        model_dir=tiny_dir,
        data_dir=tiny_data_dir,
        max_num_seqs=2,
        max_num_batched_tokens=1024,
        max_model_len=512,
        kv_cache_gib=1.0,
        enforce_eager=True,
        dtype="float32",
    )
    with caplog.at_level(logging.INFO, logger="inference.engines.vllm"):
        engine = VllmEngine.create(settings=settings)
    try:
        assert "dtype float32: set by VLLM_DTYPE=float32" in caplog.text
        assert engine._llm.model_config.dtype == torch.float32
        prompt = engine.tokenizer.encode("Hello there, how are you?")
        request = EngineRequest(
            request_id=str(uuid.uuid4()),
            prompt="",
            prompt_token_ids=list(prompt),
            max_tokens=8,
            temperature=0.0,
            top_p=1.0,
            stop=(),
        )
        tokens = 0
        finish = None
        async for delta in engine.stream(request):
            tokens += delta.tokens
            finish = delta.finish_reason or finish
        assert tokens >= 1
        assert finish in ("stop", "length")
    finally:
        engine.shutdown()
        del engine  # AsyncLLM.__del__ at interpreter exit would shut down again, noisily
        gc.collect()
