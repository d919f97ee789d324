"""Answers starting workers' requests for the published system prompts (every web process runs
`serve_prefix_lists`), so a new worker warms its prefix cache before it takes chat
(`inference/start_warmup.py`)."""

from __future__ import annotations

import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from chatapp.prompts import selectors
from inference.wire.protocol import PREFIX_LIST_CHANNEL, PrefixList, PrefixListRequest
from inference.wire.transport import ChannelLayer, serve_requests

logger = logging.getLogger(__name__)


def published_system_prompts() -> list[str]:
    """Distinct system prompts of the published templates, in template-name order."""
    return list(dict.fromkeys(v.system_prompt for v in selectors.published_versions()))


async def serve_prefix_lists(*, layer: ChannelLayer | None = None) -> None:
    layer = layer or get_channel_layer()
    assert layer is not None

    async def answer(raw: dict[str, Any]) -> None:
        request = PrefixListRequest.model_validate(raw)
        prompts = await database_sync_to_async(published_system_prompts)()
        await layer.send(request.reply_channel, PrefixList(system_prompts=prompts).to_channel())

    await serve_requests(
        layer, PREFIX_LIST_CHANNEL, answer, log=logger, failure="prefix list request failed"
    )
