"""The delivery log of event subscriptions: paged by key in SQL (the list envelope, newest
first by ``(created_at, id)``) and kept for ``RAILYARD_RETENTION_DELIVERIES_DAYS``
(docs/api.md, "Event subscriptions"; docs/operations.md, "Retention")."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from backend.db.models import DeliveryAttempt, EventDelivery
from backend.runtime import Runtime
from backend.services.operations import retention
from backend.services.subscriptions.sending import message_id
from backend.settings import Settings
from tests.integration.retention_rows import by_class, rules

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC)


async def subscription(client: httpx.AsyncClient) -> str:
    """A workflow's subscription; its deliveries' path."""
    wf = (await client.post("/api/v1/workflows", json={"name": "Logged"})).json()
    base = f"/api/v1/workflows/{wf['id']}/subscriptions"
    r = await client.post(base, json={"url": "http://127.0.0.1:9/hook", "events": ["run.failed"]})
    assert r.status_code == 201, r.text
    return f"{base}/{r.json()['id']}/deliveries"


async def add_deliveries(
    runtime: Runtime, path: str, rows: list[tuple[datetime, str]]
) -> list[uuid.UUID]:
    """Deliveries made at the given times in the given statuses, one attempt each; ids."""
    sub_id = uuid.UUID(path.split("/")[-2])
    ids = []
    async with runtime.sessionmaker() as session, session.begin():
        source_id = int(await session.scalar(select(func.count()).select_from(EventDelivery)))
        for created_at, status in rows:
            source_id += 1
            d = EventDelivery(
                id=uuid.uuid4(),
                subscription_id=sub_id,
                source="events",
                source_id=source_id,
                event_type="run.failed",
                ordering_key=f"run:{uuid.uuid4()}",
                body=b'{"type": "run.failed", "timestamp": "2026-12-05T00:00:00Z", "data": {}}',
                status=status,
                attempts=1,
                next_attempt_at=created_at,
                created_at=created_at,
            )
            session.add(d)
            await session.flush()
            session.add(
                DeliveryAttempt(
                    delivery_id=d.id, number=1, at=created_at, status_code=500, duration_ms=3
                )
            )
            ids.append(d.id)
    return ids


async def pages(client: httpx.AsyncClient, path: str, limit: int) -> list[dict[str, Any]]:
    """Every page of the log, following ``next_cursor``."""
    found: list[dict[str, Any]] = []
    r = await client.get(path, params={"limit": limit})
    while True:
        assert r.status_code == 200, r.text
        body = r.json()
        assert len(body["data"]) <= limit
        found.append(body)
        if not body["has_more"]:
            return found
        assert body["next"].endswith(f"cursor={body['next_cursor']}")
        r = await client.get(path, params={"limit": limit, "cursor": body["next_cursor"]})


async def test_the_log_pages_newest_first_by_key_with_attempts(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    path = await subscription(client)
    same = NOW - timedelta(minutes=5)  # three made in one instant: ordered by id
    times = [NOW - timedelta(minutes=m) for m in (9, 8, 7)] + [same] * 3 + [NOW]
    ids = await add_deliveries(runtime, path, [(t, "failed") for t in times])
    expected = [str(i) for _, i in sorted(zip(times, ids, strict=True), reverse=True)]

    seen = await pages(client, path, limit=3)
    assert [len(p["data"]) for p in seen] == [3, 3, 1]
    assert [d["id"] for p in seen for d in p["data"]] == expected
    assert all(len(d["attempts"]) == 1 for p in seen for d in p["data"])

    # a delivery made after the first page was read neither shifts nor repeats the rest
    first = (await client.get(path, params={"limit": 3})).json()
    await add_deliveries(runtime, path, [(NOW + timedelta(seconds=1), "pending")])
    rest = await client.get(path, params={"limit": 10, "cursor": first["next_cursor"]})
    assert [d["id"] for d in rest.json()["data"]] == expected[3:]

    bad = await client.get(path, params={"cursor": "bm90IGEgY3Vyc29y"})
    assert bad.status_code == 400 and bad.json()["errors"][0]["parameter"] == "cursor"


async def test_retention_removes_ended_deliveries_past_their_days(
    client: httpx.AsyncClient, runtime: Runtime, settings: Settings
) -> None:
    path = await subscription(client)
    old = NOW - timedelta(days=31)
    ids = await add_deliveries(
        runtime,
        path,
        [
            (old, "delivered"),
            (old, "failed"),
            (old, "pending"),  # still to send: kept however old
            (NOW - timedelta(days=29), "failed"),
        ],
    )

    off = await retention.run_pass(runtime.sessionmaker, rules(settings))
    assert "deliveries" not in by_class(off)  # 0 days: the rule is off
    results = await retention.run_pass(
        runtime.sessionmaker, rules(settings, retention_deliveries_days=30)
    )
    assert by_class(results)["deliveries"].deleted == 2

    kept = [d["id"] for p in await pages(client, path, limit=100) for d in p["data"]]
    assert sorted(kept) == sorted(str(i) for i in ids[2:])
    async with runtime.sessionmaker() as session:
        attempts = await session.scalars(
            select(DeliveryAttempt.delivery_id).where(DeliveryAttempt.delivery_id.in_(ids))
        )
        assert sorted(attempts) == sorted(ids[2:])


async def test_the_webhook_id_is_the_delivery_id_as_documented(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    """The log's ``webhook_id`` (the ``webhook-id`` header of every attempt, per the
    sender) is ``msg_`` and the delivery id's hex digits, as the document states it."""
    doc = (await client.get("/schema/openapi.json")).json()
    member = doc["components"]["schemas"]["DeliveryOut"]["properties"]["webhook_id"]
    pattern = re.compile(member["pattern"])
    assert "without dashes" in member["description"]
    path = await subscription(client)
    [made] = await add_deliveries(runtime, path, [(NOW, "failed")])
    [logged] = (await client.get(path)).json()["data"]
    assert logged["id"] == str(made)
    assert logged["webhook_id"] == message_id(made) == f"msg_{made.hex}"
    assert pattern.fullmatch(logged["webhook_id"]), (member, logged)
    assert not pattern.fullmatch(f"msg_{made}")  # the dashed form is not it
