"""The leader's poller (backend/services/triggers/events/polling.py, ``run_polls``) keeps its polls
going independently: a vendor that does not answer holds up its own subscription's poll
only, while the others go on polling on their interval."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from backend.services.triggers.events.polling import run_polls
from tests.diagrams import diagram, edge, node
from tests.integration.flows import publish
from tests.integration.railyard_processes import until
from tests.integration.trigger_faults import ItemsVendor

pytestmark = pytest.mark.integration


def _items_flow(vendor: ItemsVendor) -> dict[str, Any]:
    config = {"items": "items", "id": "id", "mode": "newest", "order": "seq"}
    trigger = node("items", "http.new_items", url=vendor.url, **config)
    return diagram(
        [trigger, node("note", "control.set", mapping={"seen": "=id"})], [edge("items", "note")]
    )


async def test_a_vendor_that_does_not_answer_holds_up_only_its_own_poll(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    slow, fast = ItemsVendor(total=1, every=0).start(), ItemsVendor(total=1, every=0).start()
    stop = asyncio.Event()
    try:
        for vendor in (slow, fast):
            await publish(client, _items_flow(vendor))
        async with runtime.engine.begin() as conn:  # below http.new_items' 30 s floor
            await conn.execute(text("update trigger_subscriptions set interval_seconds = 1"))
        slow.hold()  # its first poll waits for an answer
        polling = asyncio.create_task(
            run_polls(runtime.events, runtime.execution.clock, stop, tick=0.2)
        )

        async def fast_polled_on() -> bool:
            return slow.held.is_set() and fast.requests >= 3

        await until(fast_polled_on, 30, "the other subscription to poll on meanwhile")
        assert slow.requests == 1  # still the one poll, not answered
        slow.release()
        stop.set()
        await asyncio.wait_for(polling, 30)
    finally:
        stop.set()
        slow.stop()
        fast.stop()
