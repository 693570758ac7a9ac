"""Node-type versions through publish and real runs; the runs page's status filter.

A new version of a built-in node type is installed while a run of the version published
before it is in flight: that run, and every later run of that version, keeps the old
behaviour; publishing again pins the new version and its runs get the new behaviour.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from backend.engine.nodes import NODE_TYPES
from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.fakes.node_versions import registered
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, start_manual

pytestmark = pytest.mark.integration


def _delay_then_set(seconds: float) -> dict[str, Any]:
    return diagram(
        [
            node("start", "trigger.manual"),
            node("nap", "control.delay", seconds=seconds),
            node("set", "control.set", mapping={"total": "=qty * 2"}),
        ],
        [edge("start", "nap"), edge("nap", "set")],
    )


async def _versions(client: httpx.AsyncClient, wf: dict[str, Any]) -> list[int]:
    r = await client.get(f"/api/workflows/{wf['id']}/versions")
    assert r.status_code == 200, r.text
    return sorted(v["number"] for v in r.json())


async def test_new_node_version_leaves_published_versions_and_their_runs_unchanged(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(client, _delay_then_set(1))
    in_flight = await start_manual(client, wf, {"qty": 3, "name": "widget"})

    with registered(NODE_TYPES):
        catalog = (await client.get("/api/catalog")).json()["node_types"]
        assert {n["type"]: n["version"] for n in catalog}["control.set"] == 2
        r = await client.post(f"/api/workflows/{wf['id']}/publish")  # the same draft
        assert r.status_code == 201, r.text
        assert r.json()["version"]["number"] == 2
        assert await _versions(client, wf) == [1, 2]
        new = await start_manual(client, wf, {"qty": 3, "name": "widget"})

        assert await wait_for_run(runtime, in_flight) == "succeeded"
        assert await wait_for_run(runtime, new) == "succeeded"
        old_run, new_run = await run_detail(client, in_flight), await run_detail(client, new)
    assert old_run["version_number"] == 1
    assert old_run["output"] == {"total": 6}  # control.set version 1
    assert new_run["version_number"] == 2
    assert new_run["output"] == {"qty": 3, "name": "widget", "total": 6}  # version 2


async def test_catalog_api_exposes_node_type_versions_and_output_schemas(
    client: httpx.AsyncClient,
) -> None:
    catalog = (await client.get("/api/catalog")).json()["node_types"]
    by_type = {n["type"]: n for n in catalog}
    assert by_type["control.if"]["version"] == 1
    assert by_type["control.if"]["output_schema"]["x-same-as-input"] is True
    webhook = by_type["trigger.webhook"]["output_schema"]
    assert set(webhook["required"]) == {
        "method",
        "path",
        "query",
        "headers",
        "auth",
        "body",
        "files",
    }
    respond = by_type["control.respond"]["output_schema"]
    assert respond["properties"]["status"] == {"type": "integer"}
    # a connector action's output schema comes from its function's return type
    http = by_type["http.request"]["output_schema"]
    assert http["type"] == "object"
    assert {"status", "headers", "body"} <= set(http["properties"])
    assert "$ref" not in str(http)  # references inlined


async def test_runs_page_filters_paused_runs(client: httpx.AsyncClient, runtime: Runtime) -> None:
    wf = await publish(client, _delay_then_set(3600))
    paused = await start_manual(client, wf, {"qty": 1})
    waiting = await start_manual(client, wf, {"qty": 2})
    r = await client.post(f"/api/runs/{paused}/pause")
    assert r.status_code == 200, r.text

    page = await client.get("/runs", params={"status": "paused"})
    assert page.status_code == 200
    assert '<option value="paused" selected>Paused</option>' in page.text
    assert f'href="/runs/{paused}"' in page.text
    assert f'href="/runs/{waiting}"' not in page.text
