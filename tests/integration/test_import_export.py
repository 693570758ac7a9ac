"""Export and import of workflows: no secrets, references by name, re-binding by id or
name for the importer (or a diagnostic), clear 400s, permissions and audit."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import select

from backend.db.models import AuditLog
from backend.runtime import Runtime
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration.rbac import client_as, grant, make_user

pytestmark = pytest.mark.integration

SECRET = "sk-live-never-exported-0123456789"


async def _credential(client: httpx.AsyncClient, name: str, secret: str = SECRET) -> str:
    r = await client.post(
        "/api/credentials", json={"name": name, "type": "api_key", "data": {"api_key": secret}}
    )
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _workflow(client: httpx.AsyncClient, name: str, d: dict[str, Any] | None = None) -> str:
    wf = str((await client.post("/api/workflows", json={"name": name})).json()["id"])
    if d is not None:
        r = await client.put(f"/api/workflows/{wf}/draft", json={"diagram": d})
        assert r.status_code == 200, r.text
    return wf


def _uses(cred: str, child: str) -> dict[str, Any]:
    return diagram(
        [
            node("hook", "trigger.webhook"),
            node("call", "http.request", url="https://api.example", credential=cred),
            node("sub", "control.subworkflow", workflow_id=child),
        ],
        [edge("hook", "call"), edge("call", "sub")],
    )


async def _source(client: httpx.AsyncClient) -> tuple[str, str, str]:
    cred = await _credential(client, "Billing key")
    child = await _workflow(client, "Child", diagram([node("m", "trigger.manual")], []))
    wf = await _workflow(client, "Orders", _uses(cred, child))
    r = await client.patch(f"/api/workflows/{wf}", json={"settings": {"run_timeout_seconds": 60}})
    assert r.status_code == 200, r.text
    return wf, cred, child


async def test_export_names_references_and_holds_no_secret(client: httpx.AsyncClient) -> None:
    wf, cred, child = await _source(client)
    r = await client.get(f"/api/workflows/{wf}/export")
    assert r.status_code == 200, r.text
    assert r.headers["content-disposition"] == 'attachment; filename="orders-draft.railyard.json"'
    assert SECRET not in r.text and SECRET[-8:] not in r.text
    doc = r.json()
    assert (doc["format"], doc["format_version"]) == ("railyard/workflow", 1)
    assert doc["workflow"] == {
        "name": "Orders",
        "description": "",
        "settings": {"run_timeout_seconds": 60},
    }
    assert doc["credentials"] == [
        {
            "node": "call",
            "field": "credential",
            "type": "api_key",
            "name": "Billing key",
            "id": cred,
        }
    ]
    assert doc["workflows"] == [
        {"field": "workflow_id", "node": "sub", "name": "Child", "id": child}
    ]
    configs = {n["id"]: n["config"] for n in doc["diagram"]["nodes"]}
    assert "credential" not in configs["call"] and "workflow_id" not in configs["sub"]
    assert doc["source"]["workflow_id"] == wf and doc["source"]["version"] is None
    assert (await client.get(f"/api/workflows/{wf}/export?version=1")).status_code == 404
    bad = await client.get(f"/api/workflows/{wf}/export?version=latest")
    assert bad.status_code == 400 and bad.json()["field"] == "version"


async def test_round_trip_rebinds_by_id_for_the_same_installation(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf, _cred, _child = await _source(client)
    doc = (await client.get(f"/api/workflows/{wf}/export")).json()
    r = await client.post("/api/workflows/import", json=doc)
    assert r.status_code == 201, r.text
    out = r.json()
    assert out["name"] == "Orders" and out["references_bound"] == 2
    base = runtime.settings.base_url.rstrip("/")
    assert out["url"] == f"{base}/workflows/{out['id']}/designer"  # absolute (docs/api.md)
    assert [d for d in out["diagnostics"] if d["code"].startswith("import_")] == []
    copy = (await client.get(f"/api/workflows/{out['id']}")).json()
    original = (await client.get(f"/api/workflows/{wf}")).json()
    assert copy["draft"]["nodes"] == original["draft"]["nodes"]
    assert copy["draft"]["edges"] == original["draft"]["edges"]
    assert copy["settings"] == {"run_timeout_seconds": 60}
    async with runtime.sessionmaker() as session:
        row = (
            await session.execute(select(AuditLog).where(AuditLog.action == "workflow.import"))
        ).scalar_one()
    assert row.object_id == out["id"]
    assert row.details["into"] == "new" and row.details["references_bound"] == 2


async def test_import_binds_by_name_or_asks_to_pick(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime
) -> None:
    wf, cred, child = await _source(client)
    doc = (await client.get(f"/api/workflows/{wf}/export")).json()
    # as if from another installation: the ids mean nothing here
    doc["credentials"][0]["id"] = "00000000-0000-0000-0000-000000000001"
    doc["workflows"][0]["id"] = None
    editor = await make_user(runtime, "importer@example.com", "editor")
    async with client_as(settings, runtime, "importer@example.com") as c:
        # nothing the importer may use: both references need picking
        r = await c.post("/api/workflows/import", json=doc, params={"name": "Mine"})
        assert r.status_code == 201, r.text
        codes = {(d["code"], d["node_id"], d["field"]) for d in r.json()["diagnostics"]}
        assert ("import_credential_missing", "call", "credential") in codes
        assert ("import_workflow_missing", "sub", "workflow_id") in codes
        draft = (await c.get(f"/api/workflows/{r.json()['id']}")).json()["draft"]
        assert "credential" not in next(n for n in draft["nodes"] if n["id"] == "call")["config"]
        # granted: bound by name
        await grant(runtime, "credential", cred, f"user:{editor}", "use")
        await grant(runtime, "workflow", child, f"user:{editor}", "run")
        r = await c.post("/api/workflows/import", json=doc)
        assert r.status_code == 201 and r.json()["references_bound"] == 2, r.text
        draft = (await c.get(f"/api/workflows/{r.json()['id']}")).json()["draft"]
        configs = {n["id"]: n["config"] for n in draft["nodes"]}
        assert configs["call"]["credential"] == cred and configs["sub"]["workflow_id"] == child
        # two credentials of that name: ambiguous
        await _credential(c, "Billing key", "another-secret-value-1234")
        r = await c.post("/api/workflows/import", json=doc)
        codes = {d["code"] for d in r.json()["diagnostics"]}
        assert "import_credential_ambiguous" in codes


async def test_import_never_binds_an_unlisted_id(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime
) -> None:
    wf, cred, _child = await _source(client)
    doc = (await client.get(f"/api/workflows/{wf}/export")).json()
    doc["credentials"] = []
    for n in doc["diagram"]["nodes"]:
        if n["id"] == "call":
            n["config"]["credential"] = cred  # smuggled in, not listed
    await make_user(runtime, "sly@example.com", "editor")
    async with client_as(settings, runtime, "sly@example.com") as c:
        r = await c.post("/api/workflows/import", json=doc)
        assert r.status_code == 201, r.text
        assert "import_unlisted_reference" in {d["code"] for d in r.json()["diagnostics"]}
        draft = (await c.get(f"/api/workflows/{r.json()['id']}")).json()["draft"]
        assert "credential" not in next(n for n in draft["nodes"] if n["id"] == "call")["config"]


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ([1, 2], "", "Expected `object`, got `array`"),
        ({"format": "n8n"}, "", "missing required field `format_version`"),
        (
            {"format": "other", "format_version": 1, "workflow": {"name": "x"}, "diagram": {}},
            "$.format",
            "not a Railyard workflow export",
        ),
        (
            {
                "format": "railyard/workflow",
                "format_version": 3,
                "workflow": {"name": "x"},
                "diagram": {},
            },
            "$.format_version",
            "unsupported format_version 3",
        ),
        (
            {
                "format": "railyard/workflow",
                "format_version": 1,
                "workflow": {"name": " "},
                "diagram": {},
            },
            "name",
            "name must not be empty",
        ),
    ],
)
async def test_bad_imports_are_clear_400s(
    client: httpx.AsyncClient, body: Any, field: str, words: str
) -> None:
    r = await client.post("/api/workflows/import", json=body)
    assert r.status_code == 400, r.text
    assert r.json().get("field", "") == field and words in r.text  # no field: the whole body
    assert (await client.get("/api/workflows")).json() == []  # nothing half-created


async def test_import_over_the_diagram_limits_is_refused(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    limit = settings.diagram_limits().max_nodes
    nodes = [node(f"n{i}", "control.set") for i in range(limit + 1)]
    doc = {
        "format": "railyard/workflow",
        "format_version": 1,
        "workflow": {"name": "Huge"},
        "diagram": diagram(nodes, []),
    }
    r = await client.post("/api/workflows/import", json=doc)
    assert r.status_code == 400
    assert r.json()["field"] == "$.diagram.nodes" and "max_diagram_nodes" in r.json()["detail"]


async def test_import_into_a_draft_follows_the_revision_rule(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime
) -> None:
    wf, _cred, _child = await _source(client)
    doc = (await client.get(f"/api/workflows/{wf}/export")).json()
    target = await _workflow(client, "Target", diagram([node("m", "trigger.manual")], []))
    revision = (await client.get(f"/api/workflows/{target}")).json()["draft_revision"]
    stale = await client.post(
        f"/api/workflows/{target}/import", json=doc, params={"base_revision": revision - 1}
    )
    assert stale.status_code == 409
    r = await client.post(
        f"/api/workflows/{target}/import", json=doc, params={"base_revision": revision}
    )
    assert r.status_code == 200, r.text
    assert r.json()["revision"] == revision + 1 and r.json()["name"] == "Target"
    viewer = await make_user(runtime, "viewer@example.com", "editor")
    await grant(runtime, "workflow", target, f"user:{viewer}", "read")
    async with client_as(settings, runtime, "viewer@example.com") as c:
        assert (await c.get(f"/api/workflows/{target}/export")).status_code == 200
        assert (await c.post(f"/api/workflows/{target}/import", json=doc)).status_code == 403
    await make_user(runtime, "op@example.com", "operator")
    async with client_as(settings, runtime, "op@example.com") as c:
        assert (await c.post("/api/workflows/import", json=doc)).status_code == 403


async def test_an_unbound_reference_blocks_publishing_until_bound(
    client: httpx.AsyncClient,
) -> None:
    wf, cred, _child = await _source(client)
    doc = (await client.get(f"/api/workflows/{wf}/export")).json()
    # as if from another installation: no credential here has that id or name
    doc["credentials"][0].update(id="00000000-0000-0000-0000-000000000001", name="Elsewhere")
    r = await client.post("/api/workflows/import", json=doc)
    assert r.status_code == 201, r.text
    assert r.json()["references_bound"] == 1  # the called workflow, by id
    copy = r.json()["id"]
    draft = (await client.get(f"/api/workflows/{copy}")).json()["draft"]
    nodes = {n["id"]: n for n in draft["nodes"]}
    assert nodes["call"]["unbound"] == ["credential"] and "unbound" not in nodes["sub"]

    # the warning does not vanish: compiling the stored draft reports it as an error
    check = await client.post(f"/api/workflows/{copy}/compile", json={"diagram": draft})
    found = {
        (d["severity"], d["code"], d["node_id"], d["field"]) for d in check.json()["diagnostics"]
    }
    assert ("error", "unbound_reference", "call", "credential") in found
    r = await client.post(f"/api/workflows/{copy}/publish")
    assert r.status_code == 422, r.text
    assert any(
        d["code"] == "unbound_reference" and (d["node_id"], d["field"]) == ("call", "credential")
        for d in r.json()["diagnostics"]
    ), r.text

    # bound in the designer (the field now holds a credential): publishing goes through
    nodes["call"]["config"]["credential"] = cred
    r = await client.put(f"/api/workflows/{copy}/draft", json={"diagram": draft})
    assert r.status_code == 200, r.text
    r = await client.post(f"/api/workflows/{copy}/publish")
    assert r.status_code == 201, r.text
