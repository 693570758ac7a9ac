"""Typed data flow through the API: live diagnostics, publish refusal, field picker, preview,
body-schema inference (real PostgreSQL, Redis and arq worker)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run

pytestmark = pytest.mark.integration

BODY = {"customer": {"email": "ada@example.com"}, "qty": 2}


def order_flow(body_schema: dict[str, Any] | None, mapping: dict[str, Any]) -> dict[str, Any]:
    hook = node("hook", "trigger.webhook", respond="last_step")
    if body_schema is not None:
        hook["config"]["body_schema"] = body_schema
    return diagram([hook, node("set_1", "control.set", mapping=mapping)], [edge("hook", "set_1")])


CASE_MAPPING = {"greeting": '="Hello " & body.customer.name', "total": "=body.qty * body.price"}


async def new_workflow(client: httpx.AsyncClient, name: str) -> str:
    r = await client.post("/api/workflows", json={"name": name})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def field_messages(diagnostics: list[dict[str, Any]]) -> dict[str, str]:
    return {d["field"]: d["message"] for d in diagnostics if d["severity"] == "error"}


async def publish_refused_with_case_messages(
    client: httpx.AsyncClient, wf: str, versions: int = 0
) -> None:
    r = await client.post(f"/api/workflows/{wf}/publish")
    assert r.status_code == 422, r.text
    found = field_messages(r.json()["diagnostics"])
    assert found["mapping.greeting"].startswith("customer has no field name; known: email")
    assert found["mapping.total"].startswith("body has no field price; known: customer, qty")
    assert len((await client.get(f"/api/workflows/{wf}/versions")).json()) == versions


async def test_expression_missing_field(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    """Case expression-missing-field: a declared body schema, and one captured from a real
    call, both flag the two fields live (compile, draft save) and refuse publishing; no run
    ever produces "Hello " or drops total."""
    from backend.services.workflows.expression_data import infer_schema

    declared = infer_schema(BODY)
    wf = await new_workflow(client, "Greeting (declared)")
    d = order_flow(declared, CASE_MAPPING)
    live = await client.post(f"/api/workflows/{wf}/compile", json={"diagram": d})
    assert live.status_code == 200 and live.json()["ok"] is False
    assert field_messages(live.json()["diagnostics"]) == {
        "mapping.greeting": "customer has no field name; known: email",
        "mapping.total": "body has no field price; known: customer, qty",
    }
    assert all(x["node_id"] == "set_1" for x in live.json()["diagnostics"])
    saved = await client.put(f"/api/workflows/{wf}/draft", json={"diagram": d})
    assert saved.json()["ok"] is False and len(saved.json()["diagnostics"]) == 2
    await publish_refused_with_case_messages(client, wf)

    # Captured: publish without a schema, let a real call arrive, infer from it.
    wf2 = await new_workflow(client, "Greeting (captured)")
    plain = order_flow(None, {"email": "=body.customer.email"})
    await client.put(f"/api/workflows/{wf2}/draft", json={"diagram": plain})
    assert (await client.post(f"/api/workflows/{wf2}/publish")).status_code == 201
    url = (await client.get(f"/api/workflows/{wf2}")).json()["webhook_url"]
    r = await client.post("/hooks/" + url.split("/hooks/", 1)[1], json=BODY)
    assert r.status_code == 200, r.text
    assert r.json() == {"email": "ada@example.com"}
    inferred = await client.post(
        f"/api/workflows/{wf2}/expressions/infer-schema", json={"source": "last_run"}
    )
    assert inferred.status_code == 200, inferred.text
    assert inferred.json()["source"].startswith("run ")
    assert inferred.json()["schema"] == declared
    await client.put(
        f"/api/workflows/{wf2}/draft",
        json={"diagram": order_flow(inferred.json()["schema"], CASE_MAPPING)},
    )
    await publish_refused_with_case_messages(client, wf2, versions=1)
    runs = (await client.get(f"/api/runs?workflow_id={wf2}")).json()
    assert len(runs) == 1, "only the capturing call ran; the faulty mapping never did"
    assert await wait_for_run(runtime, runs[0]["id"]) == "succeeded"


async def test_fields_and_preview_use_the_last_run(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await new_workflow(client, "Picker")
    d = order_flow(None, {"email": "=body.customer.email", "n": "=body.qty + 1"})
    d["nodes"].append(node("set_2", "control.set", mapping={"x": "=n"}))
    d["edges"].append(edge("set_1", "set_2"))
    await client.put(f"/api/workflows/{wf}/draft", json={"diagram": d})

    before = await client.post(
        f"/api/workflows/{wf}/expressions/fields", json={"diagram": d, "node_id": "set_2"}
    )
    assert before.status_code == 200, before.text
    assert before.json()["data_from"] is None
    groups = {g["prefix"]: g for g in before.json()["sources"]}
    assert list(groups) == ["", "$trigger", "$steps.hook", "$steps.set_1", "$run"]
    assert [f["path"] for f in groups[""]["fields"]] == ["email", "n"]
    assert {"path": "n", "type": "number", "description": ""} in groups[""]["fields"]

    assert (await client.post(f"/api/workflows/{wf}/publish")).status_code == 201
    url = (await client.get(f"/api/workflows/{wf}")).json()["webhook_url"]
    r = await client.post("/hooks/" + url.split("/hooks/", 1)[1], json=BODY)
    assert r.status_code == 200, r.text

    after = await client.post(
        f"/api/workflows/{wf}/expressions/fields", json={"diagram": d, "node_id": "set_2"}
    )
    groups = {g["prefix"]: g for g in after.json()["sources"]}
    assert after.json()["data_from"].startswith("run ")
    assert groups[""]["examples"] == {"email": '"ada@example.com"', "n": "3"}
    trigger_paths = [f["path"] for f in groups["$trigger"]["fields"]]
    assert "body.customer.email" in trigger_paths, "fields of the run's body are listed"

    async def preview(expression: str, **extra: Any) -> dict[str, Any]:
        body = {"diagram": d, "node_id": "set_2", "expression": expression, **extra}
        r = await client.post(f"/api/workflows/{wf}/expressions/preview", json=body)
        assert r.status_code == 200, r.text
        return dict(r.json())

    result = await preview('="Order " & n & " for " & $trigger.body.customer.email')
    assert result["value"] == "Order 3 for ada@example.com" and result["error"] is None
    assert result["data_from"].startswith("run ")
    assert (await preview("$steps.set_1.n * 10"))["value"] == 30
    broken = await preview("=n +")
    assert broken["value"] is None and broken["error"]["position"] is not None
    assert "syntax error" in broken["error"]["message"]
    limited = await preview('=$pad("", 100000000)')
    assert limited["error"]["limit"] == "string length"
    typo = await preview("=nn")
    assert typo["diagnostics"][0]["message"].startswith("the input has no field nn")
    pinned = await preview("=n", pinned={"set_1": {"n": 41}})
    assert pinned["value"] == 41 and pinned["data_from"] == "pinned data"


async def test_expression_api_refuses_bad_input(client: httpx.AsyncClient) -> None:
    wf = await new_workflow(client, "Bad input")
    d = order_flow(None, {"a": 1})
    r = await client.post(
        f"/api/workflows/{wf}/expressions/preview",
        json={"diagram": d, "node_id": "nope", "expression": "1"},
    )
    assert r.status_code == 400 and r.json()["field"] == "node_id"
    r = await client.post(
        f"/api/workflows/{wf}/expressions/fields", json={"diagram": {"nodes": 3}, "node_id": "x"}
    )
    assert r.status_code == 400
    r = await client.post(
        f"/api/workflows/{wf}/expressions/infer-schema", json={"source": "test_call"}
    )
    assert r.status_code == 400 and r.json()["field"] == "source"
    r = await client.post(
        f"/api/workflows/{wf}/expressions/infer-schema", json={"sample": {"a": [1, 2]}}
    )
    assert r.json()["schema"] == {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"type": "integer"}}},
        "required": ["a"],
    }
    missing = "00000000-0000-0000-0000-000000000000"
    r = await client.post(
        f"/api/workflows/{missing}/expressions/preview",
        json={"diagram": d, "node_id": "set_1", "expression": "1"},
    )
    assert r.status_code == 404
