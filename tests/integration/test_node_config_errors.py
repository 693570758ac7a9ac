"""A node config its node type's Struct refuses never runs as published: publishing it
answers 422 naming the node and the field, and a version stored before that check fails
the step with kind ``invalid_config`` naming the field (not the run's processing)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, start_manual, steps_by_id

pytestmark = pytest.mark.integration


def _flow(step_type: str, **config: Any) -> dict[str, Any]:
    return diagram(
        [node("start", "trigger.manual"), node("step", step_type, **config)],
        [edge("start", "step")],
    )


async def test_publishing_a_config_its_struct_refuses_answers_422_naming_node_and_field(
    client: httpx.AsyncClient,
) -> None:
    wf = (await client.post("/api/workflows", json={"name": "Bad config"})).json()
    for d, field in (
        (_flow("control.respond", status=700), "status"),
        (_flow("http.request", url="http://127.0.0.1:9/x", max_pages=0), "max_pages"),
    ):
        r = await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": d})
        assert r.status_code == 200, r.text
        r = await client.post(f"/api/workflows/{wf['id']}/publish")
        assert r.status_code == 422, r.text
        found = [d for d in r.json()["diagnostics"] if d["code"] == "invalid_config"]
        assert [(d["node_id"], d["field"]) for d in found] == [("step", field)], found
        assert f"invalid config: {field}: " in found[0]["message"]
    assert (await client.get(f"/api/workflows/{wf['id']}")).json()["active_version"] is None


async def test_a_stored_config_its_struct_refuses_fails_the_step_naming_the_field(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(client, _flow("control.set", mapping=[{"name": "a", "value": 1}]))
    async with runtime.engine.begin() as conn:  # published before publish checked values
        await conn.execute(
            text(
                "update workflow_versions set graph = jsonb_set(graph,"
                " '{steps,1,config,keep_input}', '\"yes\"') where workflow_id = :id"
            ),
            {"id": wf["id"]},
        )
    run_id = await start_manual(client, wf, {"x": 1})
    assert await wait_for_run(runtime, run_id) == "failed"
    error = steps_by_id(await run_detail(client, run_id))["step"]["error"]
    assert (error["kind"], error["field"]) == ("invalid_config", "keep_input"), error
