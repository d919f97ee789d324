"""The web side's version of its FAQ set: what a worker in sync computes from the snapshot."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from chatapp.faq import selectors
from inference.faq.sync import data_version, set_version
from tests.support.faq_standin import entry_create

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_web_sides_version_is_the_version_of_its_snapshot() -> None:
    await sync_to_async(entry_create)()
    await sync_to_async(entry_create)(question="Where is my parcel?", answer="Under Orders.")
    stale = await sync_to_async(entry_create)(question="How do I pay?", answer="By card.")
    stale.alternates = "Can I pay by invoice?"  # saved, not yet re-embedded: not served
    await sync_to_async(stale.save)()
    await sync_to_async(entry_create)(question="Old question?", answer="Old.", enabled=False)

    chunks = await sync_to_async(lambda: list(selectors.snapshot_chunks()))()
    sent = [data for chunk in chunks for data in chunk]
    assert len(sent) == 2
    expected = set_version((data.entry_id, data_version(data)) for data in sent)
    assert await sync_to_async(selectors.served_set_version)() == expected
