"""A worker's slots and request tasks: freed however a request ends, and told to its owner."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from inference.active_requests import Active, ActiveRequests
from inference.answering import Progress
from inference.wire.protocol import ChatTurn, GenerateRequest


def _request() -> GenerateRequest:
    return GenerateRequest(
        request_id=str(uuid.uuid4()),
        reply_channel="relay",
        messages=[ChatTurn(role="user", content="hi")],
        submitted_at=time.time(),
    )


async def _started(
    active: ActiveRequests, work: asyncio.Future[None], *, background: bool = False
) -> GenerateRequest:
    """Take the slots the way the worker does, then run `work` in them."""
    await active.slots.acquire()
    if background:
        await active.background_slots.acquire()
    request = _request()

    async def serve() -> None:
        await work

    active.run(request, serve(), progress=Progress(), background=background, name="t")
    return request


async def test_a_finished_request_frees_its_slots_and_is_reported() -> None:
    finished: list[Active] = []
    active = ActiveRequests(max_active=1, max_background=1, on_finished=finished.append)
    work: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    request = await _started(active, work, background=True)
    assert request.request_id in active
    assert (len(active), active.background) == (1, 1)
    assert active.slots.locked()
    assert active.background_slots.locked()
    work.set_result(None)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert request.request_id not in active
    assert not active.slots.locked()
    assert not active.background_slots.locked()
    assert [a.request.request_id for a in finished] == [request.request_id]


async def test_a_clients_cancel_is_told_apart_from_an_abort() -> None:
    finished: list[Active] = []
    active = ActiveRequests(max_active=2, max_background=1, on_finished=finished.append)
    loop = asyncio.get_running_loop()
    stopped = await _started(active, loop.create_future())
    aborted = await _started(active, loop.create_future())
    assert active.cancel(stopped.request_id)
    assert active.cancelled_by_client(stopped.request_id)
    assert not active.cancel("not-here")
    running = await active.abort_all()
    assert {a.request.request_id for a in running} == {stopped.request_id, aborted.request_id}
    await asyncio.sleep(0)
    by_id = {a.request.request_id: a for a in finished}
    assert by_id[stopped.request_id].cancelled_by_client
    assert not by_id[aborted.request_id].cancelled_by_client
    assert len(active) == 0
    assert not active.slots.locked()


@pytest.mark.parametrize(
    ("max_active", "max_background", "background_at_once"), [(4, 2, 2), (1, 3, 1)]
)
async def test_background_work_never_fills_the_engine(
    max_active: int, max_background: int, background_at_once: int
) -> None:
    active = ActiveRequests(
        max_active=max_active, max_background=max_background, on_finished=lambda _: None
    )
    taken = 0
    while not active.background_slots.locked():
        await active.background_slots.acquire()
        taken += 1
    assert taken == background_at_once
