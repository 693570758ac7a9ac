"""For each / Sub-workflow contracts through the API: a child whose Manual trigger declares
no Input schema is typed by what its callers send (live diagnostics, field picker, where
it came from; a person sees nothing of a caller they may not read), and publishing a
caller refuses a child version reading fields its call does not send; the callers are
found through their index (real PostgreSQL)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import event, text

from backend.engine.expression_paths import JsonataReader
from backend.runtime import Runtime
from backend.services.workflows import child_contracts
from backend.settings import Settings
from tests.diagrams import ORDERS_BODY as ORDERS
from tests.diagrams import diagram, edge, node
from tests.integration.rbac import client_as

pytestmark = pytest.mark.integration


def child_draft(value: str) -> dict[str, Any]:
    shape = node("shape", "control.set", label="Shape", mapping=[{"name": "sku", "value": value}])
    return diagram([node("start", "trigger.manual"), shape], [edge("start", "shape")])


async def create(client: httpx.AsyncClient, name: str, draft: dict[str, Any]) -> str:
    r = await client.post("/api/workflows", json={"name": name})
    assert r.status_code == 201, r.text
    wf = str(r.json()["id"])
    assert (await client.put(f"/api/workflows/{wf}/draft", json={"diagram": draft})).is_success
    return wf


def errors(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in body["diagnostics"] if d["severity"] == "error"]


async def test_callers_type_the_child_and_check_it_at_their_publish(
    client: httpx.AsyncClient,
) -> None:
    child = await create(client, "One order", child_draft("=sku"))
    assert (await client.post(f"/api/workflows/{child}/publish")).status_code == 201
    hook = node("hook", "trigger.webhook", body_schema=ORDERS)
    each = node("each", "control.foreach", items="=body.orders", workflow_id=child)
    parent_draft = diagram([hook, each], [edge("hook", "each")])
    parent = await create(client, "All orders", parent_draft)

    # the parent: its call sends {item, index, input}; version 1 of the child reads `sku`
    saved = await client.put(f"/api/workflows/{parent}/draft", json={"diagram": parent_draft})
    [problem] = errors(saved.json())
    assert problem["code"] == "child_contract" and problem["node_id"] == "each"
    assert problem["field"] == "workflow_id"
    message = problem["message"]
    assert "'One order' (version 1)" in message and "'Shape'" in message, message
    assert "field mapping.0.value: the input has no field sku" in message, message
    refused = await client.post(f"/api/workflows/{parent}/publish")
    assert refused.status_code == 422 and "child_contract" in refused.text

    # the child's draft: its Manual trigger declares nothing, so the caller's shape types it
    live = await client.post(
        f"/api/workflows/{child}/compile", json={"diagram": child_draft("=sku")}
    )
    [unknown] = errors(live.json())
    assert unknown["code"] == "unknown_field" and unknown["node_id"] == "shape"
    fields = await client.post(
        f"/api/v1/workflows/{child}/expressions/fields",
        json={"diagram": child_draft("=sku"), "node_id": "shape"},
    )
    assert fields.status_code == 200, fields.text
    inferred = fields.json()["inferred_input"]
    assert inferred["callers"] == [
        {
            "workflow_id": parent,
            "workflow": "All orders",
            "node_id": "each",
            "step": "each",
            "kind": "For each",
        }
    ]
    assert set(inferred["schema"]["properties"]) == {"item", "index", "input"}
    paths = {f["path"] for f in fields.json()["sources"][0]["fields"]}
    assert {"item.sku", "index", "input.body"} <= paths, paths

    # the child reads what is sent: it publishes (version 2), and so does the parent
    fixed = child_draft("=item.sku")
    assert (await client.put(f"/api/workflows/{child}/draft", json={"diagram": fixed})).is_success
    assert (await client.post(f"/api/workflows/{child}/publish")).status_code == 201
    assert (await client.post(f"/api/workflows/{parent}/publish")).status_code == 201

    # a call pinned to version 1 is checked against version 1
    each["config"]["version"] = 1
    pinned = await client.put(f"/api/workflows/{parent}/draft", json={"diagram": parent_draft})
    assert [d["code"] for d in errors(pinned.json())] == ["child_contract"]
    # a declared Input schema wins over the callers' shape
    declared = child_draft("=sku")
    declared["nodes"][0]["config"]["input_schema"] = {
        "type": "object",
        "properties": {"sku": {"type": "string"}},
    }
    own = await client.post(f"/api/workflows/{child}/compile", json={"diagram": declared})
    assert errors(own.json()) == []


async def test_subworkflow_sends_its_input_mapping(client: httpx.AsyncClient) -> None:
    child = await create(client, "Notify", child_draft("=email"))
    assert (await client.post(f"/api/workflows/{child}/publish")).status_code == 201
    hook = node("hook", "trigger.webhook", body_schema=ORDERS)
    call = node("call", "control.subworkflow", workflow_id=child, input="=body")
    parent = await create(client, "Caller", diagram([hook, call], [edge("hook", "call")]))
    refused = await client.post(f"/api/workflows/{parent}/publish")
    assert refused.status_code == 422
    [problem] = errors(refused.json())
    assert "no field email" in problem["message"] and "known: orders" in problem["message"]
    # the child sees the mapping's shape: `orders`, a list of {sku}
    fields = await client.post(
        f"/api/v1/workflows/{child}/expressions/fields",
        json={"diagram": child_draft("=orders"), "node_id": "shape"},
    )
    assert fields.json()["inferred_input"]["callers"][0]["kind"] == "Sub-workflow"
    paths = {f["path"] for f in fields.json()["sources"][0]["fields"]}
    assert "orders.sku" in paths or "orders" in paths, paths


async def test_a_person_sees_only_the_callers_they_may_read(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime
) -> None:
    """The child's inferred input, as its owner (an editor) is shown it (field picker,
    preview, the known fields a compile or a save lists), holds the fields of the editor's
    own caller only; a caller the editor may not read (the admin's) adds neither its name
    nor its field names. The admin, who reads both, sees both."""
    margin = {"type": "object", "properties": {"margin_rate": {"type": "number"}}}
    async with client_as(settings, runtime, "ed.contracts@example.com", "editor") as editor:
        child = await create(editor, "Child of two", child_draft("=orders"))
        hook = node("hook", "trigger.webhook", body_schema=ORDERS)
        call = node("call", "control.subworkflow", workflow_id=child, input="=body")
        mine = await create(
            editor, "Editor's caller", diagram([hook, call], [edge("hook", "call")])
        )
        hidden_hook = node("hook", "trigger.webhook", body_schema=margin)
        hidden = diagram([hidden_hook, call], [edge("hook", "call")])
        await create(client, "Admin's caller", hidden)

        ask = {"diagram": child_draft("=orders"), "node_id": "shape"}
        seen = (await editor.post(f"/api/v1/workflows/{child}/expressions/fields", json=ask)).json()
        assert [c["workflow_id"] for c in seen["inferred_input"]["callers"]] == [mine]
        assert "margin_rate" not in str(seen), seen
        preview = await editor.post(
            f"/api/v1/workflows/{child}/expressions/preview",
            json={**ask, "expression": "=margin_rate"},
        )
        assert "margin_rate" in str(preview.json()["diagnostics"])  # unknown to the editor
        # nor in the diagnostics of a compile or a save (the known fields they list)
        wrong = {"diagram": child_draft("=nothing")}
        for answer in (
            await editor.post(f"/api/v1/workflows/{child}/compile", json=wrong),
            await editor.put(f"/api/v1/workflows/{child}/draft", json=wrong),
        ):
            [unknown] = errors(answer.json())
            assert "known: orders" in unknown["message"], unknown
            assert "margin_rate" not in unknown["message"], unknown
        # nor in those of an export imported back into the draft
        exported = (await editor.get(f"/api/v1/workflows/{child}/export")).json()
        imported = await editor.post(f"/api/v1/workflows/{child}/import", json=exported)
        [unknown] = errors(imported.json())
        assert "known: orders" in unknown["message"], unknown
        assert "margin_rate" not in unknown["message"], unknown
    admin = (await client.post(f"/api/v1/workflows/{child}/expressions/fields", json=ask)).json()
    assert len(admin["inferred_input"]["callers"]) == 2
    paths = {f["path"] for f in admin["sources"][0]["fields"]}
    assert {"orders", "margin_rate"} <= paths, paths
    compiled = await client.post(f"/api/v1/workflows/{child}/compile", json=wrong)
    assert "margin_rate" in errors(compiled.json())[0]["message"]


async def test_the_callers_are_found_through_their_index(runtime: Runtime) -> None:
    """The callers query, as the service sends it, is served by ``ix_workflows_called``
    among 3,000 drafts (rolled back)."""
    async with runtime.sessionmaker() as session:
        await session.execute(
            text(
                "insert into workflows (id, name, description, draft, webhook_token)"
                " select gen_random_uuid(), 'w' || g, '', jsonb_build_object('nodes',"
                "  jsonb_build_array(jsonb_build_object('id', 'call', 'config',"
                "  jsonb_build_object('workflow_id', gen_random_uuid()::text)))),"
                "  'index-test-' || g from generate_series(1, 3000) g"
            )
        )
        await session.execute(text("analyze workflows"))
        await session.execute(text("set local enable_seqscan = off"))  # a small table
        conn = await session.connection()
        sent: list[tuple[str, Any]] = []

        def capture(*args: Any) -> None:
            sent.append((args[2], args[3]))  # (conn, cursor, statement, parameters, ...)

        event.listen(conn.sync_connection, "before_cursor_execute", capture)
        try:
            await child_contracts.callers(session, uuid.uuid4(), runtime.catalog, JsonataReader())
        finally:
            event.remove(conn.sync_connection, "before_cursor_execute", capture)
        [(statement, parameters)] = [s for s in sent if "jsonb_path_query_array" in s[0]]
        plan = await conn.exec_driver_sql("explain (costs off) " + statement, parameters)
        lines = "\n".join(row[0] for row in plan)
        await session.rollback()
    assert "ix_workflows_called" in lines, lines
