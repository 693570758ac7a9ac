"""Version history (with notes), one version, compare, restore into the draft, and the
permission and audit rules around them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import select

from backend.db.models import AuditLog
from backend.runtime import Runtime
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import ADMIN_EMAIL
from tests.integration.rbac import client_as, grant, make_user

pytestmark = pytest.mark.integration

V1 = diagram(
    [node("hook", "trigger.webhook", 0, 0), node("set_1", "control.set", 240, 0, mapping={"a": 1})],
    [edge("hook", "set_1")],
)
V2 = diagram(
    [
        node("hook", "trigger.webhook", 50, 80),
        node("set_1", "control.set", 240, 0, mapping={"a": 2}),
        node("respond", "control.respond", 480, 0),
    ],
    [edge("hook", "set_1"), edge("set_1", "respond")],
)


async def _workflow(client: httpx.AsyncClient) -> str:
    r = await client.post("/api/workflows", json={"name": "Versioned"})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _publish(client: httpx.AsyncClient, wf: str, d: dict[str, Any], note: str = "") -> int:
    assert (await client.put(f"/api/workflows/{wf}/draft", json={"diagram": d})).status_code == 200
    r = await client.post(f"/api/workflows/{wf}/publish", json={"note": note} if note else None)
    assert r.status_code == 201, r.text
    assert r.json()["version"]["note"] == note.strip()
    return int(r.json()["version"]["number"])


async def test_history_lists_number_publisher_when_and_note(client: httpx.AsyncClient) -> None:
    wf = await _workflow(client)
    assert await _publish(client, wf, V1) == 1
    assert await _publish(client, wf, V2, "  adds the answer  ") == 2
    history = (await client.get(f"/api/workflows/{wf}/versions")).json()
    assert [(v["number"], v["note"], v["active"]) for v in history] == [
        (2, "adds the answer", True),
        (1, "", False),
    ]
    me = (await client.get("/api/auth/me")).json()
    assert history[0]["publisher"] == (me["display_name"] or ADMIN_EMAIL)
    assert history[0]["created_by"] and history[0]["created_at"]
    one = (await client.get(f"/api/workflows/{wf}/versions/1")).json()
    assert one["diagram"]["nodes"][1]["config"] == {"mapping": {"a": 1}}
    assert (await client.get(f"/api/workflows/{wf}/versions/7")).status_code == 404


async def test_publish_response_names_the_publisher_and_the_active_version(
    client: httpx.AsyncClient,
) -> None:
    """The publish answer says who published the version and that it became active, for
    a new version (201) and for an unchanged draft that re-activates an earlier one (200);
    the OpenAPI schema declares both fields as always present."""
    me = (await client.get("/api/auth/me")).json()
    name = me["display_name"] or ADMIN_EMAIL
    wf = await _workflow(client)
    await client.put(f"/api/workflows/{wf}/draft", json={"diagram": V1})
    first = await client.post(f"/api/workflows/{wf}/publish")
    assert first.status_code == 201, first.text
    assert (first.json()["version"]["publisher"], first.json()["version"]["active"]) == (name, True)
    assert await _publish(client, wf, V2) == 2
    await client.put(f"/api/workflows/{wf}/draft", json={"diagram": V1})
    again = await client.post(f"/api/workflows/{wf}/publish")
    assert again.status_code == 200, again.text
    version = again.json()["version"]
    assert (version["number"], version["publisher"], version["active"]) == (1, name, True)
    history = (await client.get(f"/api/workflows/{wf}/versions")).json()
    assert [(v["number"], v["active"]) for v in history] == [(2, False), (1, True)]
    schema = (await client.get("/schema/openapi.json")).json()["components"]["schemas"]
    out = schema["VersionOut"]
    assert {"publisher", "active"} <= set(out["required"])
    assert out["properties"]["active"]["type"] == "boolean"


async def test_publish_note_is_limited_and_typed(client: httpx.AsyncClient) -> None:
    wf = await _workflow(client)
    await client.put(f"/api/workflows/{wf}/draft", json={"diagram": V1})
    r = await client.post(f"/api/workflows/{wf}/publish", json={"note": "x" * 2001})
    assert r.status_code == 400 and "2000" in r.text
    r = await client.post(f"/api/workflows/{wf}/publish", json={"note": 5})
    assert r.status_code == 400


async def test_compare_versions_and_draft(client: httpx.AsyncClient) -> None:
    wf = await _workflow(client)
    await _publish(client, wf, V1)
    await _publish(client, wf, V2)
    r = await client.get(f"/api/workflows/{wf}/diff", params={"from": "1", "to": "2"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["from"], body["to"]) == (1, 2)
    assert body["summary"] == {
        "nodes_added": 1,
        "nodes_removed": 0,
        "nodes_changed": 1,
        "edges_added": 1,
        "edges_removed": 0,
    }
    changed = next(n for n in body["diff"]["nodes"] if n["kind"] == "changed")
    assert changed["id"] == "set_1"  # hook only moved: positions are ignored
    assert changed["fields"] == [
        {"path": "config.mapping.a", "kind": "changed", "before": 1, "after": 2}
    ]
    # defaults: the active version (2) against the draft (the same)
    same = (await client.get(f"/api/workflows/{wf}/diff")).json()
    assert (same["from"], same["to"], same["diff"]["nodes"]) == (2, "draft", [])
    bad = await client.get(f"/api/workflows/{wf}/diff", params={"from": "first"})
    assert bad.status_code == 400 and bad.json()["field"] == "from"
    missing = await client.get(f"/api/workflows/{wf}/diff", params={"from": "9"})
    assert missing.status_code == 404


async def test_restore_follows_the_revision_rule_and_is_audited(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = await _workflow(client)
    await _publish(client, wf, V1)
    await _publish(client, wf, V2)
    revision = (await client.get(f"/api/workflows/{wf}")).json()["draft_revision"]
    stale = await client.post(
        f"/api/workflows/{wf}/versions/1/restore", json={"base_revision": revision - 1}
    )
    assert stale.status_code == 409 and stale.json()["revision"] == revision
    r = await client.post(
        f"/api/workflows/{wf}/versions/1/restore", json={"base_revision": revision}
    )
    assert r.status_code == 200, r.text
    assert r.json()["revision"] == revision + 1 and r.json()["version"] == 1
    draft = (await client.get(f"/api/workflows/{wf}")).json()
    assert [n["id"] for n in draft["draft"]["nodes"]] == ["hook", "set_1"]
    assert draft["active_version"] == 2  # restoring never publishes
    async with runtime.sessionmaker() as session:
        row = (
            await session.execute(
                select(AuditLog).where(AuditLog.action == "workflow.version_restore")
            )
        ).scalar_one()
    assert row.details == {"version": 1, "revision": revision + 1}
    assert row.before["nodes"] == 3 and row.after["nodes"] == 2
    # the draft is now version 1's: comparing shows no change
    same = await client.get(f"/api/workflows/{wf}/diff", params={"from": "1"})
    assert same.json()["diff"]["nodes"] == []


async def test_restore_needs_edit_and_reading_needs_read(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime
) -> None:
    wf = await _workflow(client)
    await _publish(client, wf, V1)
    reader = await make_user(runtime, "reader@example.com", "editor")
    await grant(runtime, "workflow", wf, f"user:{reader}", "read")
    async with client_as(settings, runtime, "reader@example.com") as c:
        assert (await c.get(f"/api/workflows/{wf}/versions")).status_code == 200
        assert (await c.get(f"/api/workflows/{wf}/diff")).status_code == 200
        r = await c.post(f"/api/workflows/{wf}/versions/1/restore", json={})
        assert r.status_code == 403
    async with client_as(settings, runtime, "stranger@example.com", "editor") as c:
        assert (await c.get(f"/api/workflows/{wf}/versions")).status_code == 404
        assert (await c.get(f"/api/workflows/{wf}/versions/1")).status_code == 404


async def test_restore_refuses_a_credential_the_restorer_may_not_use(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime
) -> None:
    cred = (
        await client.post(
            "/api/credentials",
            json={"name": "Key", "type": "api_key", "data": {"api_key": "k" * 20}},
        )
    ).json()["id"]
    wf = await _workflow(client)
    with_cred = diagram(
        [
            node("hook", "trigger.webhook"),
            node("call", "http.request", url="https://a.example", credential=cred),
        ],
        [edge("hook", "call")],
    )
    await _publish(client, wf, with_cred)
    await _publish(client, wf, V1)
    editor = await make_user(runtime, "ed@example.com", "editor")
    await grant(runtime, "workflow", wf, f"user:{editor}", "edit")
    async with client_as(settings, runtime, "ed@example.com") as c:
        r = await c.post(f"/api/workflows/{wf}/versions/1/restore", json={})
        assert r.status_code == 403 and "may not use credential" in r.json()["detail"]
        assert (await c.post(f"/api/workflows/{wf}/versions/2/restore")).status_code == 200


async def test_history_and_diff_pages(client: httpx.AsyncClient) -> None:
    wf = await _workflow(client)
    await _publish(client, wf, V1, "first <b>cut</b>")
    await _publish(client, wf, V2)
    page = await client.get(f"/workflows/{wf}/versions")
    assert page.status_code == 200
    assert "first &lt;b&gt;cut&lt;/b&gt;" in page.text  # notes are escaped
    assert f"/workflows/{wf}/designer?restore=1" in page.text
    assert f"/api/v1/workflows/{wf}/export?version=2" in page.text
    diff = await client.get(f"/workflows/{wf}/compare", params={"from": "1", "to": "2"})
    assert diff.status_code == 200
    assert "Version 1 → Version 2" in diff.text
    assert 'data-path="config.mapping.a"' in diff.text
    assert 'data-node-id="respond" data-kind="added"' in diff.text
    bad = await client.get(f"/workflows/{wf}/compare", params={"from": "x"})
    assert bad.status_code == 400 and "from must be a version number" in bad.text
    gone = await client.get(f"/workflows/{wf}/compare", params={"from": "8"})
    assert gone.status_code == 404


@pytest.mark.parametrize("number", ["0", "99999999999", "-1"])
async def test_out_of_range_version_numbers_are_404_or_400(
    client: httpx.AsyncClient, number: str
) -> None:
    wf = await _workflow(client)
    for r in (
        await client.get(f"/api/workflows/{wf}/versions/{number}"),
        await client.post(f"/api/workflows/{wf}/versions/{number}/restore"),
        await client.get(f"/api/workflows/{wf}/diff", params={"from": number}),
        await client.get(f"/api/workflows/{wf}/export", params={"version": number}),
        await client.get(f"/workflows/{wf}/compare", params={"from": number}),
    ):
        assert r.status_code in (400, 404), (r.request.url, r.status_code, r.text)
