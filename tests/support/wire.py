"""A worker's events built by hand, for tests that play the worker on the channel layer."""

from __future__ import annotations

from inference.wire.protocol import Done


def done(request_id: str, seq: int, *, prompt_tokens: int = 1, completion_tokens: int = 1) -> Done:
    """The end of an answer that stopped by itself; its timings are 1 ms each."""
    return Done(
        request_id=request_id,
        seq=seq,
        finish_reason="stop",
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cached_prompt_tokens=0,
        queue_wait_ms=1.0,
        ttft_ms=1.0,
        total_ms=1.0,
    )
