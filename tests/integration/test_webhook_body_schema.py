"""A webhook body that breaks the workflow's declared body schema never runs "succeeded"
down the wrong branch (issue: a required ``qty`` missing made the total vanish and the If
take "small"). ``trigger.webhook`` version 4: ``invalid_body`` ``reject`` (the default)
answers 422 naming the field and starts nothing; ``mark_invalid`` starts a run that fails
at its trigger step with kind ``invalid_body``. Versions 1-3 keep running as published
(no check). Real PostgreSQL, Redis and worker."""

from __future__ import annotations

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
