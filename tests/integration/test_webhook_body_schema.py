"""A webhook body that breaks the workflow's declared body schema never runs "succeeded"
down the wrong branch (issue: a required ``qty`` missing made the total vanish and the If
take "small"). ``trigger.webhook`` version 4: ``invalid_body`` ``reject`` (the default)
answers 422 naming the field and starts nothing; ``mark_invalid`` starts a run that fails
at its trigger step with kind ``invalid_body``. Versions 1-3 keep running as published
(no check). The same check applies to each event of a CloudEvents delivery (its ``data``),
to the designer's test URL and to test runs of the draft. Real PostgreSQL, Redis and worker."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, steps_by_id

pytestmark = pytest.mark.integration

SCHEMA = {
    "type": "object",
    "properties": {"qty": {"type": "integer"}, "price": {"type": "number"}},
    "required": ["qty", "price"],
}


def _order_flow(**hook: Any) -> dict[str, Any]:
    """Webhook (body schema: qty and price required) -> Set total = qty * price -> If
    total > 100 -> Set size "big" / Set size "small"."""
    return diagram(
        [
            node("hook", "trigger.webhook", body_schema=SCHEMA, **hook),
            node("total", "control.set", mapping={"total": "=body.qty * body.price"}),
            node("if_big", "control.if", condition="=total > 100"),
            node("big", "control.set", mapping={"size": "big"}),
            node("small", "control.set", mapping={"size": "small"}),
        ],
        [
            edge("hook", "total"),
            edge("total", "if_big"),
            edge("if_big", "big", "true"),
            edge("if_big", "small", "false"),
        ],
    )


async def _runs_of(runtime: Runtime, workflow_id: str) -> int:
    async with runtime.engine.connect() as conn:
        found = await conn.execute(
            text("select count(*) from runs where workflow_id = :w"), {"w": workflow_id}
        )
        return int(found.scalar_one())


async def test_body_breaking_the_schema_is_refused_with_422_naming_the_field(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(client, _order_flow())
    r = await client.post(wf["webhook_path"], json={"price": 50})
    assert r.status_code == 422, r.text
    answer = r.json()
    assert answer["field"] == "body.qty"
    assert "'qty' is a required property" in answer["detail"]
    assert answer["status"] == 422
    assert answer["errors"] == [{"detail": "'qty' is a required property", "pointer": "#/qty"}]
    assert await _runs_of(runtime, wf["id"]) == 0

    r = await client.post(wf["webhook_path"], json={"qty": "three", "price": 50})
    assert r.status_code == 422
    assert r.json()["field"] == "body.qty"

    r = await client.post(wf["webhook_path"], json={"qty": 3, "price": 50})
    assert r.status_code == 202
    run_id = r.json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "succeeded"
    steps = steps_by_id(await run_detail(client, run_id))
    assert steps["big"]["status"] == "succeeded"
    assert steps["small"]["status"] != "succeeded"


async def test_body_breaking_the_schema_can_start_a_run_marked_invalid(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(client, _order_flow(invalid_body="mark_invalid"))
    r = await client.post(wf["webhook_path"], json={"price": 50, "qty": None})
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "failed"
    detail = await run_detail(client, run_id)
    assert detail["error"]["kind"] == "invalid_body"
    assert detail["error"]["field"] == "body.qty"
    assert detail["error"]["step_id"] == "hook"
    steps = steps_by_id(detail)
    assert steps["hook"]["status"] == "failed"
    assert steps["hook"]["input"]["body"] == {"price": 50, "qty": None}  # kept, replayable
    assert {steps[s]["status"] for s in ("total", "big", "small")} == {"not_run"}


async def test_a_caller_cannot_mark_its_own_body_invalid_or_valid(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    """``body_errors`` sits beside the body in the run input: a body naming it is data."""
    wf = await publish(client, _order_flow(invalid_body="mark_invalid"))
    r = await client.post(
        wf["webhook_path"], json={"qty": 3, "price": 50, "body_errors": [{"field": "x"}]}
    )
    assert r.status_code == 202
    assert await wait_for_run(runtime, r.json()["run_id"]) == "succeeded"


# -- the same check on every way a body reaches the trigger ------------------------------

CE_JSON = "application/cloudevents+json"
CE_BATCH = "application/cloudevents-batch+json"


def _event(event_id: str, data: Any) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": event_id,
        "source": "https://shop.example.com/orders",
        "type": "com.example.order.created",
        "datacontenttype": "application/json",
        "data": data,
    }


def _ce_order_flow(**hook: Any) -> dict[str, Any]:
    """A CloudEvents webhook whose body schema describes each event's ``data``."""
    return diagram(
        [
            node("hook", "trigger.webhook", cloudevents=True, body_schema=SCHEMA, **hook),
            node("total", "control.set", mapping={"total": "=data.qty * data.price"}),
        ],
        [edge("hook", "total")],
    )


async def test_cloudevents_data_breaking_the_schema_is_refused_with_422_in_every_mode(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(client, _ce_order_flow())
    path = wf["webhook_path"]
    structured = await client.post(
        path,
        content=json.dumps(_event("e-1", {"price": 50})),
        headers={"content-type": CE_JSON},
    )
    assert structured.status_code == 422, structured.text
    answer = structured.json()
    assert answer["field"] == "data.qty"
    assert answer["errors"] == [{"detail": "'qty' is a required property", "pointer": "#/data/qty"}]
    binary = await client.post(
        path,
        json={"qty": "three", "price": 50},
        headers={
            "ce-specversion": "1.0",
            "ce-id": "e-2",
            "ce-source": "https://shop.example.com/orders",
            "ce-type": "com.example.order.created",
        },
    )
    assert binary.status_code == 422, binary.text
    assert binary.json()["field"] == "data.qty"
    assert binary.json()["errors"][0]["pointer"] == "#/qty"  # the body is the data
    batch = [_event("e-3", {"qty": 1, "price": 2}), _event("e-4", {"qty": 1})]
    r = await client.post(path, content=json.dumps(batch), headers={"content-type": CE_BATCH})
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("event 1 of the batch: ")
    assert r.json()["errors"][0]["pointer"] == "#/1/data/price"
    assert await _runs_of(runtime, wf["id"]) == 0  # not even the batch's valid event
    good = await client.post(
        path,
        content=json.dumps(_event("e-5", {"qty": 3, "price": 50})),
        headers={"content-type": CE_JSON},
    )
    assert good.status_code == 202, good.text
    assert await wait_for_run(runtime, good.json()["run_id"]) == "succeeded"


async def test_cloudevents_data_breaking_the_schema_can_start_a_run_marked_invalid(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(client, _ce_order_flow(invalid_body="mark_invalid"))
    batch = [_event("e-1", {"qty": 1, "price": 2}), _event("e-2", {"price": 2})]
    r = await client.post(
        wf["webhook_path"], content=json.dumps(batch), headers={"content-type": CE_BATCH}
    )
    assert r.status_code == 202, r.text
    good, bad = (link["run_id"] for link in r.json()["runs"])
    assert await wait_for_run(runtime, good) == "succeeded"
    assert await wait_for_run(runtime, bad) == "failed"
    detail = await run_detail(client, bad)
    assert detail["error"]["kind"] == "invalid_body"
    assert detail["error"]["field"] == "data.qty"
    assert steps_by_id(detail)["total"]["status"] == "not_run"


async def _listening_test_path(client: httpx.AsyncClient, d: dict[str, Any]) -> tuple[str, str]:
    """A never-published workflow with draft ``d``, listening for a test call: (its id,
    its test URL path)."""
    wf = (await client.post("/api/workflows", json={"name": "Draft only"})).json()
    r = await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": d})
    assert r.status_code == 200, r.text
    info = (await client.get(f"/api/workflows/{wf['id']}/webhook")).json()
    assert (await client.post(f"/api/workflows/{wf['id']}/webhook/listen")).json()["listening"]
    return wf["id"], "/hooks/test/" + info["test_url"].split("/hooks/test/", 1)[1]


async def test_a_test_call_gets_what_a_delivery_would_get(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    """The designer's test URL checks the body as the published webhook will: 422 naming
    the field (reject), or the sample kept with its problems (mark_invalid)."""
    wf_id, path = await _listening_test_path(client, _order_flow())
    r = await client.post(path, json={"price": 50})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "body.qty"
    call = (await client.get(f"/api/workflows/{wf_id}/webhook/test-call")).json()
    assert "'qty' is a required property" in call["error"]

    wf_id, path = await _listening_test_path(client, _order_flow(invalid_body="mark_invalid"))
    r = await client.post(path, json={"price": 50})
    assert r.status_code == 200, r.text
    call = (await client.get(f"/api/workflows/{wf_id}/webhook/test-call")).json()
    assert call["input"]["body"] == {"price": 50}
    assert call["input"]["body_errors"][0]["field"] == "body.qty"

    wf_id, path = await _listening_test_path(client, _ce_order_flow())
    r = await client.post(
        path, content=json.dumps(_event("e-1", {"qty": 1})), headers={"content-type": CE_JSON}
    )
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "data.price"
    assert await _runs_of(runtime, wf_id) == 0


async def test_a_test_run_of_the_draft_checks_its_input_body(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    """A test run (the designer's Test workflow / Test step) with a webhook input breaking
    the body schema: 400 naming the field in the input (reject), or a run failed at its
    trigger as invalid_body (mark_invalid)."""
    wf = (await client.post("/api/workflows", json={"name": "Draft only"})).json()
    await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": _order_flow()})
    tests = f"/api/workflows/{wf['id']}/test-runs"
    r = await client.post(tests, json={"input": {"body": {"price": 50}}})
    assert r.status_code == 400, r.text
    assert r.json()["field"] == "input.body.qty"
    assert "'qty' is a required property" in r.json()["detail"]
    r = await client.post(tests, json={"input": {"body": {"qty": 3, "price": 50}}})
    assert r.status_code == 201, r.text
    assert await wait_for_run(runtime, r.json()["run_id"]) == "succeeded"

    marked = _order_flow(invalid_body="mark_invalid")
    await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": marked})
    r = await client.post(tests, json={"input": {"body": {"price": 50}}})
    assert r.status_code == 201, r.text
    assert await wait_for_run(runtime, r.json()["run_id"]) == "failed"
    detail = await run_detail(client, r.json()["run_id"])
    assert detail["error"]["kind"] == "invalid_body"
    assert detail["error"]["field"] == "body.qty"
