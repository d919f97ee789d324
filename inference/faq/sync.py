"""How a worker's FAQ index converges on the web side's set, whatever the channel layer drops.

Upserts and removals reach workers as group broadcasts, and a worker's set as a snapshot it
asks for: the channel layer is at-most-once, so any of these can be lost (a full group, an
expiry, a web side that was down when the worker asked). So every `FaqCache.resync_s` seconds
the worker sends a `FaqSyncRequest` with the version (a digest) of the set it indexes; the web
side compares it with the version of its enabled set, sends the full snapshot when they differ,
and confirms with `FaqInSync`. Each confirmation makes the index fresh as of the request's send
time; a lookup is answered only while the index is fresh (`FaqCache.max_stale_s`). Hence:

- a removed or disabled entry stops being served within `resync_s` plus a round trip once a
  request gets through, and within `max_stale_s` in any case (requests or replies lost, no
  web side answering): past that the model answers instead;
- a new entry whose broadcast was lost is served after the next resync.

The version covers what a lookup uses (id, scope, answer, phrasings), not the vectors: they
are a function of the phrasings, and leaving them out lets the web side compute its version
without reading them (the snapshot is read only when the sets differ).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from inference.wire.protocol import FAQ_SNAPSHOT_CHANNEL, FaqEntryData, FaqSyncRequest

if TYPE_CHECKING:
    from inference.faq.cache import FaqCache
    from inference.wire.transport import Transport

logger = logging.getLogger(__name__)

DEFAULT_RESYNC_S = 30.0
# A missed confirmation or two is normal (a web process restarting); three in a row is not.
STALE_AFTER_RESYNCS = 3


def resync_s_from_env() -> float:
    raw = os.environ.get("INFERENCE_FAQ_RESYNC_S", "")
    try:
        value = float(raw) if raw else DEFAULT_RESYNC_S
    except ValueError as exc:
        raise ValueError(f"INFERENCE_FAQ_RESYNC_S must be a number, got {raw!r}") from exc
    if value <= 0:
        raise ValueError(f"INFERENCE_FAQ_RESYNC_S must be positive, got {raw!r}")
    return value


def entry_version(*, entry_id: int, scope: str, answer: str, phrasings: Sequence[str]) -> str:
    """One entry's digest, the same on the web side (from the database) and in the worker."""
    canonical = json.dumps(
        [entry_id, scope, answer, list(phrasings)], ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def data_version(data: FaqEntryData) -> str:
    return entry_version(
        entry_id=data.entry_id, scope=data.scope, answer=data.answer, phrasings=data.phrasings
    )


def set_version(entry_versions: Iterable[tuple[int, str]]) -> str:
    """The digest of a whole set, from (entry id, entry digest) pairs in any order."""
    digest = hashlib.sha256()
    for entry_id, version in sorted(entry_versions):
        digest.update(f"{entry_id}:{version};".encode())
    return digest.hexdigest()


async def faq_resync(*, cache: FaqCache, transport: Transport, reply_channel: str) -> None:
    """Ask for a sync at once, then every `cache.resync_s` seconds, until cancelled.

    Replies arrive on `reply_channel` (the worker's own channel), where the worker hands them
    to `cache.apply`.
    """
    while True:
        sent_at = time.monotonic()
        request = FaqSyncRequest(
            reply_channel=reply_channel,
            version=cache.begin_sync(),
            sent_at=sent_at,
            decision=cache.decider.describe(),
        )
        try:
            if not await transport.send(FAQ_SNAPSHOT_CHANNEL, request):
                logger.warning("FAQ sync request not sent; retrying in %.0f s", cache.resync_s)
        except asyncio.CancelledError:
            raise
        except Exception:  # a lost request is retried anyway: never stop the loop
            logger.exception("FAQ sync request failed")
        await asyncio.sleep(cache.resync_s)
