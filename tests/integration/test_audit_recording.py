"""Every change and execution request is audited, in the transaction of the change: who
(user or token, none for triggers), from where, which request, before/after."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import msgspec
import pytest
from sqlalchemy import select

from backend import crypto
from backend.db.models.credentials import AuditLog
from backend.runtime import Runtime
from backend.services.triggers.schedule_firing import fire_due
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import ADMIN_EMAIL
from tests.integration.fake_clock import FakeClock, resync
from tests.integration.flows import publish

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def settings(settings: Settings) -> Settings:
    """The integration settings plus an encryption key (credentials need one)."""
    return msgspec.structs.replace(settings, encryption_key=crypto.generate_key())


async def rows(runtime: Runtime, prefix: str = "") -> list[AuditLog]:
    async with runtime.sessionmaker() as session:
        found = await session.execute(
            select(AuditLog).where(AuditLog.action.startswith(prefix)).order_by(AuditLog.id)
        )
        return list(found.scalars())


def actions(found: list[AuditLog]) -> list[str]:
    return [r.action for r in found]


def waiting_flow() -> dict[str, Any]:
    return diagram(
        [
            node("start", "trigger.manual"),
            node("nap", "control.delay", seconds=600),
        ],
        [edge("start", "nap")],
    )


async def test_workflow_changes_are_audited_with_before_and_after(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    r = await client.post(
        "/api/workflows", json={"name": "Orders"}, headers={"x-request-id": "req-create"}
    )
    wf = r.json()
    wid = wf["id"]
    (created,) = await rows(runtime, "workflow.")
    assert created.action == "workflow.create" and created.object_id == wid
    assert created.after["name"] == "Orders" and created.before is None
    assert created.actor_label == ADMIN_EMAIL and created.request_id == "req-create"
    assert created.address == "127.0.0.1"

    await client.patch(f"/api/workflows/{wid}", json={"name": "Orders EU"})
    await client.patch(f"/api/workflows/{wid}", json={"name": "Orders EU"})  # no change
    await client.patch(f"/api/workflows/{wid}", json={"settings": {"max_concurrent_runs": 3}})
    updates = await rows(runtime, "workflow.update")
    assert [(u.before, u.after) for u in updates] == [({"name": "Orders"}, {"name": "Orders EU"})]
    (settings_row,) = await rows(runtime, "workflow.settings")
    assert (settings_row.before, settings_row.after) == ({}, {"max_concurrent_runs": 3})

    # draft saves are compact and recorded at most once per actor and window
    hook = diagram([node("hook", "trigger.webhook", methods="POST")], [])
    for d in (hook, diagram([node("hook", "trigger.webhook", methods="POST, PUT")], [])):
        r = await client.put(f"/api/workflows/{wid}/draft", json={"diagram": d})
        assert r.status_code == 200
    (draft,) = await rows(runtime, "workflow.draft_save")
    assert draft.before["nodes"] == 0 and draft.after["nodes"] == 1
    assert set(draft.after) == {"nodes", "edges", "hash"}

    r = await client.post(f"/api/workflows/{wid}/publish")
    assert r.status_code == 201
    r = await client.post(f"/api/workflows/{wid}/publish")  # unchanged: nothing recorded
    assert r.status_code == 200
    (published,) = await rows(runtime, "workflow.publish")
    assert published.details["version"] == 1 and published.details["created"] is True
    assert (published.before, published.after) == ({"active_version": None}, {"active_version": 1})
    (webhook,) = await rows(runtime, "webhook.settings")
    assert webhook.object_type == "webhook" and webhook.before is None
    assert webhook.after["methods"] == "POST, PUT"

    # a second version changing the webhook's settings: the diff is there
    d = diagram([node("hook", "trigger.webhook", methods="POST", rate_limit=10)], [])
    await client.put(f"/api/workflows/{wid}/draft", json={"diagram": d})
    r = await client.post(f"/api/workflows/{wid}/publish")
    assert r.status_code == 201
    second = (await rows(runtime, "webhook.settings"))[-1]
    assert second.before["methods"] == "POST, PUT" and second.after["rate_limit"] == 10
    assert (await rows(runtime, "workflow.publish"))[-1].details["version"] == 2

    # the page lists every one of them for this workflow
    r = await client.get("/api/admin/audit", params={"object_type": "workflow", "object_id": wid})
    assert r.status_code == 200
    assert {e["action"] for e in r.json()["entries"]} == {
        "workflow.create",
        "workflow.update",
        "workflow.settings",
        "workflow.draft_save",
        "workflow.publish",
    }


async def test_webhook_secret_and_schedule_changes_are_audited(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = await publish(client, diagram([node("hook", "trigger.webhook", auth="header")], []))
    path = f"/api/workflows/{wf['id']}/webhook/secret"
    assert (await client.put(path, json={"secret": "first-secret-1"})).status_code == 204
    assert (await client.put(path, json={"secret": "second-secret-2"})).status_code == 204
    assert (await client.delete(path)).status_code == 204
    assert (await client.delete(path)).status_code == 204  # nothing to delete: not recorded
    found = await rows(runtime, "webhook.secret")
    assert actions(found) == [
        "webhook.secret_set",
        "webhook.secret_set",
        "webhook.secret_delete",
    ]
    assert [(r.before, r.after) for r in found] == [
        ({"secret_set": False}, {"secret_set": True}),
        ({"secret_set": True}, {"secret_set": True}),
        ({"secret_set": True}, {"secret_set": False}),
    ]
    everything = str([(r.before, r.after, r.details) for r in await rows(runtime)])
    assert "first-secret-1" not in everything and "second-secret-2" not in everything

    # schedules follow publish: created, changed, disabled
    wid = wf["id"]
    for config in ({"cron": "0 9 * * *"}, {"cron": "0 10 * * *"}):
        d = diagram([node("tick", "trigger.schedule", **config)], [])
        await client.put(f"/api/workflows/{wid}/draft", json={"diagram": d})
        assert (await client.post(f"/api/workflows/{wid}/publish")).status_code == 201
    d = diagram([node("hook", "trigger.webhook")], [])
    await client.put(f"/api/workflows/{wid}/draft", json={"diagram": d})
    assert (await client.post(f"/api/workflows/{wid}/publish")).status_code == 201
    found = await rows(runtime, "schedule.")
    assert actions(found) == ["schedule.create", "schedule.update", "schedule.disable"]
    assert found[0].before is None and found[0].after["definition"]["cron"] == "0 9 * * *"
    assert found[1].before["definition"]["cron"] == "0 9 * * *"
    assert found[1].after["definition"]["cron"] == "0 10 * * *"
    assert found[2].after["enabled"] is False
    assert found[0].details["workflow_id"] == wid


async def test_credential_audit_rows_hold_no_secret(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    secret = "a-long-api-token-value-0042"
    r = await client.post(
        "/api/credentials",
        json={"name": "ops", "type": "bearer", "data": {"token": secret}},
    )
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    r = await client.patch(
        f"/api/credentials/{cid}", json={"name": "ops 2", "data": {"token": secret + "x"}}
    )
    assert r.status_code == 200, r.text
    assert (await client.delete(f"/api/credentials/{cid}")).status_code in (200, 204)
    found = await rows(runtime, "credential.")
    assert actions(found) == ["credential.create", "credential.update", "credential.delete"]
    assert found[1].before["name"] == "ops" and found[1].after["name"] == "ops 2"
    assert "token" in found[1].details["changed"]
    dumped = str([(r.before, r.after, r.details) for r in found])
    assert secret not in dumped and secret[-4:] not in dumped


async def test_run_requests_are_audited_per_actor_and_trigger(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = await publish(client, waiting_flow())
    r = await client.post(f"/api/workflows/{wf['id']}/runs", json={"input": {"n": 1}})
    assert r.status_code == 201, r.text
    run_id = r.json()["run_id"]
    assert (await client.post(f"/api/runs/{run_id}/pause")).status_code == 200
    assert (await client.post(f"/api/runs/{run_id}/pause")).status_code == 409  # not recorded
    assert (await client.post(f"/api/runs/{run_id}/resume")).status_code == 200
    assert (await client.post(f"/api/runs/{run_id}/cancel")).json() == {"cancelled": True}
    assert (await client.post(f"/api/runs/{run_id}/cancel")).status_code == 409
    r = await client.post(f"/api/runs/{run_id}/rerun", json={"from": "start"})
    assert r.status_code == 201, r.text
    new_run = r.json()["run_id"]

    found = await rows(runtime, "run.")
    assert actions(found) == ["run.start", "run.pause", "run.resume", "run.cancel", "run.rerun"]
    assert all(r.object_id == run_id and r.actor_label == ADMIN_EMAIL for r in found)
    assert found[0].details == {"trigger": "manual", "workflow_id": wf["id"], "version": 1}
    assert found[3].after == {"status": "cancelled"}
    assert found[4].details["new_run_id"] == new_run and found[4].details["from"] == "start"

    # an API token's start is the token owner's, with trigger "api"
    r = await client.post("/api/tokens", json={"name": "ci"})
    token = r.json()["token"]
    async with httpx.AsyncClient(transport=client._transport, base_url=client.base_url) as bare:
        r = await bare.post(
            f"/api/workflows/{wf['id']}/runs",
            json={"input": {}},
            headers={"authorization": f"Bearer {token}"},
        )
    assert r.status_code == 201, r.text
    last = (await rows(runtime, "run.start"))[-1]
    assert last.details["trigger"] == "api" and last.object_id == r.json()["run_id"]
    assert last.actor_user_id is not None


async def test_webhook_starts_are_not_audited_and_schedule_starts_are_actorless(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    hook = await publish(client, diagram([node("hook", "trigger.webhook")], []))
    assert (await client.post(hook["webhook_path"], json={})).status_code == 202
    assert await rows(runtime, "run.") == []

    clock = FakeClock(datetime(2024, 5, 1, 12, tzinfo=UTC))
    await publish(client, diagram([node("tick", "trigger.schedule", cron="* * * * * *")], []))
    await resync(runtime, clock)
    for _ in range(3):
        clock.advance(1)
        await fire_due(runtime.sessionmaker, runtime.execution, clock)
    found = await rows(runtime, "run.start")
    assert len(found) == 3
    assert all(r.actor_user_id is None and r.actor_label is None for r in found)
    assert all(r.details["trigger"] == "schedule" for r in found)
    assert [r.details["fire_at"] for r in found] == [
        "2024-05-01T12:00:01Z",
        "2024-05-01T12:00:02Z",
        "2024-05-01T12:00:03Z",
    ]
