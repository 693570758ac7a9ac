"""Delete = archive (runs kept, nothing triggers), restore, duplicate, rename; the
diagnostics that need the database; the workflow pickers' options."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from backend.db.models import Schedule
from backend.db.models.credentials import AuditLog
from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.encrypted_settings import settings  # noqa: F401  (the fixture)
from tests.integration.flows import publish
from tests.integration.rbac import client_as, grant, make_user

pytestmark = pytest.mark.integration


def hook_flow() -> dict[str, Any]:
    return diagram(
        [node("hook", "trigger.webhook"), node("out", "control.set", mapping={"ok": True})],
        [edge("hook", "out")],
    )


async def audit_rows(runtime: Runtime, action: str) -> list[AuditLog]:
    async with runtime.sessionmaker() as session:
        found = await session.execute(
            select(AuditLog).where(AuditLog.action == action).order_by(AuditLog.id)
        )
        return list(found.scalars())


async def schedule_row(runtime: Runtime, workflow_id: str) -> Schedule:
    async with runtime.sessionmaker() as session:
        row = (
            await session.execute(
                select(Schedule).where(Schedule.workflow_id == uuid.UUID(workflow_id))
            )
        ).scalar_one()
        return row


async def test_delete_archives_keeps_runs_and_stops_every_trigger(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(client, hook_flow())
    wid = wf["id"]
    r = await client.post(wf["webhook_path"], json={"a": 1})
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "succeeded"

    assert (await client.delete(f"/api/workflows/{wid}")).status_code == 204
    assert (await client.delete(f"/api/workflows/{wid}")).status_code == 204  # idempotent

    # out of the list, in the archived list, still readable
    assert wid not in [w["id"] for w in (await client.get("/api/workflows")).json()]
    archived = (await client.get("/api/workflows", params={"archived": "true"})).json()
    assert [w["id"] for w in archived] == [wid]
    got = (await client.get(f"/api/workflows/{wid}")).json()
    assert got["archived_at"] is not None
    # runs kept: readable and listed (searchable by workflow)
    assert (await client.get(f"/api/runs/{run_id}")).json()["status"] == "succeeded"
    listed = (await client.get("/api/runs", params={"workflow_id": wid})).json()
    assert run_id in str(listed)
    page = await client.get(f"/runs/{run_id}", headers={"accept": "text/html"})
    assert page.status_code == 200

    # nothing starts it, nothing changes it
    gone = await client.post(wf["webhook_path"], json={"a": 2})
    assert gone.status_code == 410 and "archived" in gone.json()["detail"]
    manual = await client.post(f"/api/workflows/{wid}/runs", json={"input": {}})
    assert manual.status_code == 409 and "archived" in manual.json()["detail"]
    save = await client.put(f"/api/workflows/{wid}/draft", json={"diagram": hook_flow()})
    assert save.status_code == 409
    assert (await client.post(f"/api/workflows/{wid}/publish")).status_code == 409
    rename = await client.patch(f"/api/workflows/{wid}", json={"name": "New"})
    assert rename.status_code == 409

    # restore: everything back
    r = await client.post(f"/api/workflows/{wid}/restore")
    assert r.status_code == 200 and r.json()["archived_at"] is None
    assert wid in [w["id"] for w in (await client.get("/api/workflows")).json()]
    assert (await client.post(wf["webhook_path"], json={"a": 3})).status_code == 202

    (archive,) = await audit_rows(runtime, "workflow.archive")
    assert archive.object_id == wid and archive.after == {"archived": True}
    assert archive.details["runs"] == 1 and archive.details["active_version"] == 1
    (restore,) = await audit_rows(runtime, "workflow.restore")
    assert restore.after == {"archived": False}


async def test_archiving_stops_the_schedule_and_restoring_restarts_it(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    tick = diagram([node("tick", "trigger.schedule", cron="*/5 * * * *")], [])
    wf = await publish(client, tick)
    before = await schedule_row(runtime, wf["id"])
    assert before.enabled and before.next_fire_at is not None

    assert (await client.delete(f"/api/workflows/{wf['id']}")).status_code == 204
    row = await schedule_row(runtime, wf["id"])
    assert not row.enabled and row.next_fire_at is None

    assert (await client.post(f"/api/workflows/{wf['id']}/restore")).status_code == 200
    row = await schedule_row(runtime, wf["id"])
    assert row.enabled and row.next_fire_at is not None
    assert row.next_fire_at > datetime.now(UTC)


async def test_an_error_workflow_in_use_cannot_be_archived(client: httpx.AsyncClient) -> None:
    handler = await publish(client, hook_flow())
    other = (await client.post("/api/workflows", json={"name": "Uses it"})).json()
    r = await client.patch(
        f"/api/workflows/{other['id']}", json={"settings": {"error_workflow_id": handler["id"]}}
    )
    assert r.status_code == 200, r.text
    r = await client.delete(f"/api/workflows/{handler['id']}")
    assert r.status_code == 409 and "'Uses it'" in r.json()["detail"]


async def test_only_managers_archive_and_restore(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = (await client.post("/api/workflows", json={"name": "Shared"})).json()
    editor = await make_user(runtime, "ed@example.com", "editor")
    await grant(runtime, "workflow", wf["id"], f"user:{editor}", "edit")
    async with client_as(runtime.settings, runtime, "ed@example.com") as ed:
        assert (await ed.delete(f"/api/workflows/{wf['id']}")).status_code == 403
        assert (await client.delete(f"/api/workflows/{wf['id']}")).status_code == 204
        assert (await ed.post(f"/api/workflows/{wf['id']}/restore")).status_code == 403
    # the owner (an editor owning the workflow) may
    async with client_as(runtime.settings, runtime, "own@example.com", "editor") as owner:
        mine = (await owner.post("/api/workflows", json={"name": "Mine"})).json()
        assert (await owner.delete(f"/api/workflows/{mine['id']}")).status_code == 204
        assert (await owner.post(f"/api/workflows/{mine['id']}/restore")).status_code == 200


async def test_duplicate_copies_the_draft_into_a_new_workflow_of_the_caller(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    src = await publish(client, hook_flow())
    await client.patch(
        f"/api/workflows/{src['id']}",
        json={"description": "Handles hooks", "settings": {"run_timeout_seconds": 60}},
    )
    viewer = await make_user(runtime, "view@example.com", "viewer")
    editor = await make_user(runtime, "copy@example.com", "editor")
    await grant(runtime, "workflow", src["id"], f"user:{viewer}", "read")
    await grant(runtime, "workflow", src["id"], f"user:{editor}", "read")
    async with client_as(runtime.settings, runtime, "view@example.com") as v:
        r = await v.post(f"/api/workflows/{src['id']}/duplicate", json={})
        assert r.status_code == 403 and "create" in r.json()["detail"]
    async with client_as(runtime.settings, runtime, "copy@example.com") as ed:
        r = await ed.post(f"/api/workflows/{src['id']}/duplicate", json={})
        assert r.status_code == 201, r.text
        copy = r.json()
        named = await ed.post(f"/api/workflows/{src['id']}/duplicate", json={"name": "  "})
        assert named.status_code == 400 and named.json()["field"] == "name"
        # the copy is the editor's: it may edit and delete it
        assert (await ed.delete(f"/api/workflows/{copy['id']}")).status_code == 204
    original = (await client.get(f"/api/workflows/{src['id']}")).json()
    assert copy["name"] == "Test (copy)" and copy["id"] != src["id"]
    assert copy["draft"] == original["draft"]
    assert copy["description"] == "Handles hooks"
    assert copy["settings"]["run_timeout_seconds"] == 60
    assert copy["active_version"] is None and copy["webhook_url"] != original["webhook_url"]
    assert (await client.get(f"/api/workflows/{copy['id']}/versions")).json() == []
    (row,) = await audit_rows(runtime, "workflow.duplicate")
    assert row.object_id == copy["id"] and row.details["source"] == src["id"]
    assert row.actor_user_id == editor


async def test_rename_and_describe_through_the_api_are_audited(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = (await client.post("/api/workflows", json={"name": "Old"})).json()
    r = await client.patch(
        f"/api/workflows/{wf['id']}", json={"name": "New", "description": "Does things"}
    )
    assert r.status_code == 200 and r.json()["name"] == "New"
    bad = await client.patch(f"/api/workflows/{wf['id']}", json={"name": " "})
    assert bad.status_code == 400
    (row,) = await audit_rows(runtime, "workflow.update")
    assert row.before == {"name": "Old", "description": ""}
    assert row.after == {"name": "New", "description": "Does things"}


async def test_reference_diagnostics_for_credentials_and_called_workflows(
    client: httpx.AsyncClient,
) -> None:
    bearer = await client.post(
        "/api/credentials", json={"name": "API key", "type": "bearer", "data": {"token": "t0k"}}
    )
    assert bearer.status_code == 201, bearer.text
    callee = await publish(client, hook_flow())
    host = (await client.post("/api/workflows", json={"name": "Host"})).json()
    missing_wf = str(uuid.uuid4())
    d = diagram(
        [
            node("start", "trigger.manual"),
            node(
                "mail",
                "email.send",
                credential=bearer.json()["id"],
                to=["a@example.com"],
                subject="Hi",
                text="Hello",
            ),
            node("mail2", "email.send", credential=str(uuid.uuid4()), to=["a@x.org"], subject="s"),
            node("call", "control.subworkflow", workflow_id=callee["id"]),
            node("call2", "control.subworkflow", workflow_id=missing_wf),
        ],
        [
            edge("start", "mail"),
            edge("mail", "mail2"),
            edge("mail2", "call"),
            edge("call", "call2"),
        ],
    )

    async def found() -> list[tuple[str, str, str, str]]:
        r = await client.post(f"/api/workflows/{host['id']}/compile", json={"diagram": d})
        return [
            (x["severity"], x["code"], x["node_id"], x["field"])
            for x in r.json()["diagnostics"]
            if x["code"].startswith(("credential_", "workflow_"))
        ]

    assert await found() == [
        ("error", "credential_type", "mail", "credential"),
        ("warning", "credential_missing", "mail2", "credential"),
        ("warning", "workflow_missing", "call2", "workflow_id"),
    ]
    assert (await client.delete(f"/api/workflows/{callee['id']}")).status_code == 204
    assert ("warning", "workflow_archived", "call", "workflow_id") in await found()
    r = await client.post(f"/api/workflows/{host['id']}/compile", json={"diagram": d})
    message = next(x["message"] for x in r.json()["diagnostics"] if x["code"] == "credential_type")
    assert "'API key'" in message and "'bearer'" in message and "'smtp'" in message
    # they block publishing
    await client.put(f"/api/workflows/{host['id']}/draft", json={"diagram": d})
    r = await client.post(f"/api/workflows/{host['id']}/publish")
    assert r.status_code == 422
    assert "credential_type" in [x["code"] for x in r.json()["diagnostics"]]


async def test_publish_answers_with_the_warnings(client: httpx.AsyncClient) -> None:
    d = diagram(
        [node("hook", "trigger.webhook"), node("reply", "control.respond", colour="red")],
        [edge("hook", "reply")],
    )
    wf = (await client.post("/api/workflows", json={"name": "W"})).json()
    await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": d})
    r = await client.post(f"/api/workflows/{wf['id']}/publish")
    assert r.status_code == 201, r.text
    codes = sorted(w["code"] for w in r.json()["warnings"])
    assert codes == ["ignored_step", "unknown_config_key"]


async def test_workflow_options_list_what_the_user_may_run(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    names = ["Billing sync", "billing report", "Onboarding", "Old billing"]
    ids = {}
    for name in names:
        ids[name] = (await client.post("/api/workflows", json={"name": name})).json()["id"]
    await client.delete(f"/api/workflows/{ids['Old billing']}")
    r = await client.get(
        "/designer/workflow-options",
        params={"q": "BILL", "exclude": ids["Billing sync"]},
        headers={"accept": "text/html"},
    )
    assert r.status_code == 200
    assert 'data-name="billing report"' in r.text
    assert "Billing sync" not in r.text and "Old billing" not in r.text
    assert "Onboarding" not in r.text
    none = await client.get("/designer/workflow-options", params={"q": "%"})
    assert "No workflow you may run matches" in none.text  # LIKE wildcards are literal

    operator = await make_user(runtime, "op@example.com", "operator")
    await grant(runtime, "workflow", ids["Onboarding"], f"user:{operator}", "run")
    await grant(runtime, "workflow", ids["billing report"], f"user:{operator}", "read")
    async with client_as(runtime.settings, runtime, "op@example.com") as op:
        r = await op.get("/designer/workflow-options")
        assert 'data-name="Onboarding"' in r.text
        assert "billing report" not in r.text  # read only: may not call it


async def test_workflow_list_page_forms_rename_duplicate_archive_restore(
    client: httpx.AsyncClient,
) -> None:
    wf = (await client.post("/api/workflows", json={"name": "Page one"})).json()
    page = await client.get("/workflows", headers={"accept": "text/html"})
    assert f'action="/workflows/{wf["id"]}/archive"' in page.text
    assert f'action="/workflows/{wf["id"]}/duplicate"' in page.text

    r = await client.post(
        f"/workflows/{wf['id']}/details",
        data={"name": "Page renamed", "description": "From the list"},
    )
    assert r.status_code in (302, 303) and r.headers["location"] == "/workflows"
    got = (await client.get(f"/api/workflows/{wf['id']}")).json()
    assert (got["name"], got["description"]) == ("Page renamed", "From the list")

    r = await client.post(f"/workflows/{wf['id']}/duplicate")
    assert r.status_code in (302, 303) and r.headers["location"].endswith("/designer")

    r = await client.post(f"/workflows/{wf['id']}/archive")
    assert r.headers["location"] == f"/workflows?notice=archived&workflow={wf['id']}"
    notice = await client.get(r.headers["location"], headers={"accept": "text/html"})
    assert "Archived “Page renamed”" in notice.text
    assert f'action="/workflows/{wf["id"]}/restore"' in notice.text
    listed = await client.get("/workflows", params={"archived": "true"})
    assert "Page renamed" in listed.text and "Restore" in listed.text
    designer = await client.get(f"/workflows/{wf['id']}/designer")
    assert 'id="archived-badge"' in designer.text and 'id="save-btn"' not in designer.text

    r = await client.post(f"/workflows/{wf['id']}/restore")
    assert r.headers["location"] == "/workflows"
    assert (await client.get(f"/api/workflows/{wf['id']}")).json()["archived_at"] is None


async def test_a_published_caller_of_an_archived_workflow_fails_that_step(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    callee = await publish(client, hook_flow())
    caller = await publish(
        client,
        diagram(
            [
                node("start", "trigger.manual"),
                node("call", "control.subworkflow", workflow_id=callee["id"]),
            ],
            [edge("start", "call")],
        ),
    )
    assert (await client.delete(f"/api/workflows/{callee['id']}")).status_code == 204
    r = await client.post(f"/api/workflows/{caller['id']}/runs", json={"input": {}})
    assert r.status_code == 201, r.text
    run_id = r.json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "failed"
    detail = (await client.get(f"/api/runs/{run_id}")).json()
    call = next(s for s in detail["steps"] if s["step_id"] == "call")
    assert call["error"]["kind"] == "child_failed", call["error"]
    assert "archived" in call["error"]["message"]
