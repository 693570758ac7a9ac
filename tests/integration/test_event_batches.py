"""Events handed in at the same moment are stored and started together
(backend/services/triggers/events/inbox.py, ``EventBatches``): a few statements for a group, still
one inbox row and one run per event id, each caller answered for its own event."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from backend.services.triggers.events.inbox import (
    EventBatches,
    InvalidEvent,
    Source,
    encode_event,
    idempotency_key,
)
from connectors import sdk
from tests.diagrams import diagram, edge, node
from tests.integration.flows import publish

pytestmark = pytest.mark.integration


async def test_concurrent_events_are_stored_and_started_in_groups(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    flow = diagram(
        [node("t", "trigger.manual"), node("s", "control.set", mapping={"n": "=n"})],
        [edge("t", "s")],
    )
    wf = await publish(client, flow)
    source = Source(uuid.UUID(wf["id"]), 1, "test.queue", "broker")
    batches = EventBatches(runtime.sessionmaker, runtime.execution, source)
    # 300 messages in flight, 60 of them a redelivery of another (the same id)
    ids = [f"m{n % 240}" for n in range(300)]
    events = [sdk.TriggerEvent(id=i, data={"n": int(i[1:])}) for i in ids]
    rows = await asyncio.gather(*(batches.submit(encode_event(e)) for e in events))

    new = [r for r in rows if r is not None]
    assert len(new) == len(set(new)) == 240  # the first of each id is its row
    assert batches.groups.groups < 30  # grouped, not one statement per event
    async with runtime.engine.connect() as conn:
        stored = (
            await conn.execute(
                text("select id, dedupe_key, run_id from trigger_events where workflow_id = :w"),
                {"w": wf["id"]},
            )
        ).all()
        runs = (
            await conn.execute(
                text("select idempotency_key, status, output from runs where workflow_id = :w"),
                {"w": wf["id"]},
            )
        ).all()
    assert sorted(key for _, key, _ in stored) == sorted(set(ids))
    assert all(run_id is not None for _, _, run_id in stored)
    assert sorted(key for key, _, _ in runs) == sorted(idempotency_key(r) for r in new)
    assert {status for _, status, _ in runs} == {"succeeded"}
    assert sorted(output["n"] for _, _, output in runs) == list(range(240))

    again = await asyncio.gather(*(batches.submit(encode_event(e)) for e in events[:10]))
    assert again == [None] * 10  # seen: stored once, no second run


def test_an_event_the_inbox_cannot_store_is_refused_before_any_write() -> None:
    for bad, why in [
        (sdk.TriggerEvent(id=""), "1 to 200 characters"),
        (sdk.TriggerEvent(id="x" * 201), "1 to 200 characters"),
        (sdk.TriggerEvent(id="a", data={"t": "nul \x00"}), "event a"),
        (sdk.TriggerEvent(id="b", data={"x": object()}), "not JSON"),
    ]:
        with pytest.raises(InvalidEvent, match=why):
            encode_event(bad)
