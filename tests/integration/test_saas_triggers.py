"""The built-in Slack and HubSpot triggers run by the product on real PostgreSQL and
Redis: the Slack Events sender (tests/fakes/slack_events.py) delivers signed events to
the trigger's URL, the poller polls the HubSpot-like server (tests/fakes/apis.py); each
event starts exactly one run."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import msgspec
import pytest
from sqlalchemy import select

from backend.db.models import Run, TriggerSubscription
from backend.runtime import Runtime
from backend.services.triggers.events.polling import poll_due
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.fakes.apis import HubSpotLike
from tests.fakes.slack_events import SlackEvents, UrlVerificationFailed
from tests.integration.flows import publish

pytestmark = pytest.mark.integration

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z in ms


@pytest.fixture
def crm() -> Iterator[HubSpotLike]:
    with HubSpotLike() as server:
        yield server


@pytest.fixture
def settings(settings: Settings, crm: HubSpotLike) -> Settings:
    """The integration settings with HubSpot's API at the local HubSpot-like server."""
    return msgspec.structs.replace(settings, hubspot_api_url=crm.url)


async def _credential(client: httpx.AsyncClient, type: str, data: dict[str, Any]) -> str:
    r = await client.post("/api/credentials", json={"name": type, "type": type, "data": data})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _publish(client: httpx.AsyncClient, trigger: str, **config: Any) -> str:
    """Publish a workflow started by ``trigger``; its id."""
    steps = [node("t", trigger, **config), node("s", "control.set", mapping={"seen": "=$"})]
    return str((await publish(client, diagram(steps, [edge("t", "s")])))["id"])


async def _trigger_url(client: httpx.AsyncClient, workflow_id: str) -> str:
    """The app webhook's URL as the workflow's Trigger page shows it (what the user
    pastes into the Slack app), as a path."""
    page = (await client.get(f"/workflows/{workflow_id}/trigger")).text
    found = re.search(r"http://testserver\.local(/hooks/app/[A-Za-z0-9_-]+)", page)
    assert found, "the Trigger page shows no app webhook URL"
    return found.group(1)


async def _poll_row(runtime: Runtime, workflow_id: str, *, due: bool) -> TriggerSubscription:
    """The workflow's trigger subscription; ``due`` makes it due for a poll now."""
    async with runtime.sessionmaker() as session, session.begin():
        query = select(TriggerSubscription).where(
            TriggerSubscription.workflow_id == uuid.UUID(workflow_id)
        )
        row = (await session.execute(query)).scalar_one()
        if due:
            row.next_poll_at = runtime.execution.clock.now() - timedelta(seconds=1)
        return row


async def _runs(runtime: Runtime, workflow_id: str) -> list[Run]:
    async with runtime.sessionmaker() as session:
        query = (
            select(Run).where(Run.workflow_id == uuid.UUID(workflow_id)).order_by(Run.created_at)
        )
        return list((await session.execute(query)).scalars())


async def test_slack_events_start_one_run_per_event_id(
    runtime: Runtime, client: httpx.AsyncClient
) -> None:
    app = await _credential(client, "slack.app", {"signing_secret": SIGNING_SECRET})
    wf = await _publish(client, "slack.message_posted", credential=app)
    url = await _trigger_url(client, wf)
    slack = SlackEvents(SIGNING_SECRET, client=client, retry_delays=(0.0, 0.0, 0.0))

    assert await slack.verify_url(url)  # saving the Request URL in the Slack app
    message = {"type": "message", "channel": "C123ABC456", "user": "U1", "text": "order #42"}
    delivery = await slack.send_event(url, {**message, "ts": "1767225600.000100"})
    assert delivery.delivered and [a.status for a in delivery.attempts] == [200]
    # Slack's retry of the same event (it did not see the answer): the same event_id.
    again = await slack.send_event(
        url, {**message, "ts": "1767225600.000100"}, event_id=delivery.event_id
    )
    assert again.delivered
    bot = await slack.send_event(url, {**message, "bot_id": "B1", "ts": "1767225600.000200"})
    assert [a.status for a in bot.attempts] == [200]  # acknowledged, filtered out

    runs = await _runs(runtime, wf)
    assert len(runs) == 1 and runs[0].trigger == "app_webhook"
    assert runs[0].input["text"] == "order #42" and runs[0].input["event_id"] == delivery.event_id

    stale = SlackEvents(
        SIGNING_SECRET, client=client, clock=lambda: time.time() - 600, retry_delays=()
    )
    replayed = await stale.send_event(url, message)
    forged = await SlackEvents("another app", client=client, retry_delays=()).send_event(
        url, message
    )
    assert [replayed.attempts[0].status, forged.attempts[0].status] == [401, 401]
    with pytest.raises(UrlVerificationFailed, match="401"):
        await SlackEvents("another app", client=client).verify_url(url)
    assert len(await _runs(runtime, wf)) == 1
    metrics = (await client.get("/metrics")).text
    assert 'railyard_trigger_deliveries_refused_total{reason="replay"}' in metrics


async def test_hubspot_contacts_start_one_run_each_from_now_and_back_off_on_429(
    runtime: Runtime, client: httpx.AsyncClient, crm: HubSpotLike
) -> None:
    account = await _credential(client, "hubspot.private_app", {"token": "pat-valid"})
    existing = crm.add_contact({"email": "old@example.com"}, created_ms=T0)
    wf = await _publish(client, "hubspot.contact_created", credential=account)
    events, clock = runtime.events, runtime.execution.clock
    assert await poll_due(events, clock) == 0  # the baseline: from now
    made = [
        crm.add_contact({"email": f"c{n}@example.com"}, created_ms=T0 + 1 + n // 3)
        for n in range(150)
    ]
    await _poll_row(runtime, wf, due=True)
    assert await poll_due(events, clock) == 150
    runs = await _runs(runtime, wf)
    assert sorted(r.input["id"] for r in runs) == sorted(made) and existing not in made
    assert {r.trigger for r in runs} == {"polling"}
    await _poll_row(runtime, wf, due=True)
    assert await poll_due(events, clock) == 0

    late = crm.add_contact(created_ms=T0 + 100)
    crm.rate_limit_next = 1
    await _poll_row(runtime, wf, due=True)
    assert await poll_due(events, clock) == 0
    sub = await _poll_row(runtime, wf, due=False)
    assert sub.last_error and "429" in sub.last_error
    assert sub.next_poll_at is not None
    assert sub.next_poll_at >= clock.now() + timedelta(seconds=9)  # HubSpot's 10 s window
    await _poll_row(runtime, wf, due=True)
    assert await poll_due(events, clock) == 1
    assert [r.input["id"] for r in await _runs(runtime, wf)][-1] == late
