"""Workflows API on real PostgreSQL: drafts, compile diagnostics, publish/version rules, auth."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from tests.diagrams import diagram, edge, node, order_pipeline

pytestmark = pytest.mark.integration


async def new_workflow(client: httpx.AsyncClient, name: str = "Orders") -> str:
    r = await client.post("/api/workflows", json={"name": name})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def test_publish_creates_immutable_versions_and_skips_unchanged(
    client: httpx.AsyncClient,
) -> None:
    wf = await new_workflow(client)
    d = order_pipeline("http://127.0.0.1:9/hook")
    r = await client.put(f"/api/workflows/{wf}/draft", json={"diagram": d})
    assert r.status_code == 200 and r.json()["ok"], r.text

    first = await client.post(f"/api/workflows/{wf}/publish")
    assert first.status_code == 201, first.text
    assert first.json()["version"]["number"] == 1 and first.json()["created"] is True
    assert "/hooks/" in first.json()["webhook_url"]

    again = await client.post(f"/api/workflows/{wf}/publish")
    assert again.status_code == 200 and again.json()["created"] is False
    assert again.json()["version"]["number"] == 1

    moved = copy.deepcopy(d)
    moved["nodes"][0]["position"] = {"x": 999, "y": 999}
    await client.put(f"/api/workflows/{wf}/draft", json={"diagram": moved})
    r = await client.post(f"/api/workflows/{wf}/publish")
    assert r.status_code == 200 and r.json()["version"]["number"] == 1, (
        "moving nodes is not a change"
    )

    changed = copy.deepcopy(moved)
    changed["nodes"][2]["config"]["condition"] = "=total > 500"
    await client.put(f"/api/workflows/{wf}/draft", json={"diagram": changed})
    second = await client.post(f"/api/workflows/{wf}/publish")
    assert second.status_code == 201 and second.json()["version"]["number"] == 2
    assert second.json()["version"]["content_hash"] != first.json()["version"]["content_hash"]

    versions = (await client.get(f"/api/workflows/{wf}/versions")).json()
    assert [v["number"] for v in versions] == [2, 1]
    assert (await client.get(f"/api/workflows/{wf}")).json()["active_version"] == 2


async def test_publish_with_errors_is_rejected_with_diagnostics(client: httpx.AsyncClient) -> None:
    wf = await new_workflow(client)
    bad = diagram([node("set_1", "control.set", mapping={"a": 1})], [])
    r = await client.put(f"/api/workflows/{wf}/draft", json={"diagram": bad})
    assert r.status_code == 200 and not r.json()["ok"]
    r = await client.post(f"/api/workflows/{wf}/publish")
    assert r.status_code == 422
    assert any(d["code"] == "no_trigger" for d in r.json()["diagnostics"])
    assert (await client.get(f"/api/workflows/{wf}/versions")).json() == []


TRIGGER = node("hook", "trigger.webhook")

DIAGNOSTIC_CASES: dict[str, tuple[dict[str, Any], str | None, str | None]] = {
    "unknown_node_type": (
        diagram([TRIGGER, node("x", "nope.nothing")], [edge("hook", "x")]),
        "x",
        None,
    ),
    "missing_config": (
        diagram([TRIGGER, node("if_1", "control.if")], [edge("hook", "if_1")]),
        "if_1",
        "condition",
    ),
    "expression_syntax": (
        diagram(
            [TRIGGER, node("if_1", "control.if", condition="=body.x >")], [edge("hook", "if_1")]
        ),
        "if_1",
        "condition",
    ),
    "dangling_edge": (
        diagram([TRIGGER], [edge("hook", "ghost")]),
        None,
        None,
    ),
    "duplicate_edge": (
        diagram(
            [TRIGGER, node("s", "control.set", mapping={})],
            [edge("hook", "s", edge_id="a"), edge("hook", "s", edge_id="b")],
        ),
        None,
        None,
    ),
    "no_trigger": (diagram([node("s", "control.set", mapping={})], []), None, None),
    "multiple_triggers": (
        diagram([TRIGGER, node("hook2", "trigger.manual")], []),
        "hook2",
        None,
    ),
    "unreachable_node": (
        diagram([TRIGGER, node("s", "control.set", mapping={})], []),
        "s",
        None,
    ),
    "cycle": (
        diagram(
            [TRIGGER, node("a", "control.set", mapping={}), node("b", "control.set", mapping={})],
            [edge("hook", "a"), edge("a", "b"), edge("b", "a", target_port="in", edge_id="back")],
        ),
        None,
        None,
    ),
}


@pytest.mark.parametrize("code", sorted(DIAGNOSTIC_CASES))
async def test_compile_reports_each_diagnostic_kind(client: httpx.AsyncClient, code: str) -> None:
    wf = await new_workflow(client)
    d, node_id, field = DIAGNOSTIC_CASES[code]
    r = await client.post(f"/api/workflows/{wf}/compile", json={"diagram": d})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["ok"] is False
    found = [x for x in body["diagnostics"] if x["code"] == code]
    assert found, body["diagnostics"]
    if node_id is not None:
        assert any(x["node_id"] == node_id for x in found), found
    if field is not None:
        assert any(x["field"] == field for x in found), found
    assert all(x["message"] for x in found)


async def test_malformed_diagram_is_a_clear_400(client: httpx.AsyncClient) -> None:
    wf = await new_workflow(client)
    r = await client.put(f"/api/workflows/{wf}/draft", json={"diagram": {"nodes": [{"id": 1}]}})
    assert r.status_code == 400
    assert "nodes" in r.text


async def test_every_route_but_webhooks_and_health_requires_login(
    client: httpx.AsyncClient,
) -> None:
    wf = await new_workflow(client)
    client.cookies.delete("railyard_session")
    for method, path in [
        ("GET", "/api/workflows"),
        ("GET", f"/api/workflows/{wf}"),
        ("POST", f"/api/workflows/{wf}/publish"),
        ("GET", "/api/runs"),
        ("GET", "/api/catalog"),
    ]:
        r = await client.request(method, path)
        assert r.status_code == 401, (method, path, r.status_code)
    page = await client.get("/workflows", follow_redirects=False)
    assert page.status_code in (302, 303, 307) and page.headers["location"].startswith("/login")
    assert (await client.get("/health/live")).status_code == 200


async def test_unsafe_request_without_csrf_token_is_refused(client: httpx.AsyncClient) -> None:
    del client.headers["x-csrftoken"]
    r = await client.post("/api/workflows", json={"name": "x"})
    assert r.status_code == 403


async def test_openapi_schema_lists_every_api_operation(client: httpx.AsyncClient) -> None:
    r = await client.get("/schema/openapi.json")
    assert r.status_code == 200, r.text
    ops = {
        op["operationId"]
        for path in r.json()["paths"].values()
        for op in path.values()
        if isinstance(op, dict) and "operationId" in op
    }
    expected = {"list_workflows", "create_workflow", "publish_workflow", "start_run", "get_run"}
    assert expected <= ops
    assert "receive_webhook_post" in ops


async def test_ready_probe_reports_both_services(client: httpx.AsyncClient) -> None:
    r = await client.get("/health/ready")
    assert r.status_code == 200
    assert r.json() == {"database": "ok", "redis": "ok"}


async def test_browser_gets_a_styled_404_page_and_api_gets_json(client: httpx.AsyncClient) -> None:
    page = await client.get("/runs/not-a-uuid", headers={"accept": "text/html"})
    assert page.status_code == 404
    assert "text/html" in page.headers["content-type"] and "Page not found" in page.text
    api = await client.get("/api/nothing-here", headers={"accept": "text/html"})
    assert api.status_code == 404 and api.json()["status"] == 404
