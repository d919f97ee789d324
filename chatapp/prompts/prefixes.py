"""Answers starting workers' requests for the published system prompts (every web process runs
`serve_prefix_lists`), so a new worker warms its prefix cache before it takes chat
(`inference/start_warmup.py`)."""

from __future__ import annotations

import logging

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from chatapp.prompts import selectors
from inference.wire.protocol import PREFIX_LIST_CHANNEL, PrefixList, PrefixListRequest
from inference.wire.transport import ChannelLayer

logger = logging.getLogger(__name__)


def published_system_prompts() -> list[str]:
    """Distinct system prompts of the published templates, in template-name order."""
    return list(dict.fromkeys(v.system_prompt for v in selectors.published_versions()))


async def serve_prefix_lists(*, layer: ChannelLayer | None = None) -> None:
    layer = layer or get_channel_layer()
    assert layer is not None
    while True:
        raw = await layer.receive(PREFIX_LIST_CHANNEL)
        try:
            request = PrefixListRequest.model_validate(raw)
            prompts = await database_sync_to_async(published_system_prompts)()
            await layer.send(request.reply_channel, PrefixList(system_prompts=prompts).to_channel())
        except Exception:  # one bad request must not stop the responder
            logger.exception("prefix list request failed")
