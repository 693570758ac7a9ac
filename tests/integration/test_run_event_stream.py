"""The run event stream ``GET /api/v1/runs/{id}/events`` (docs/api.md, "The run event
stream"): Server-Sent Events following a run to its end, each ``update`` carrying the run
as ``GET /api/v1/runs/{id}`` answers it, declared in the OpenAPI document as
``text/event-stream`` with a named schema per event type."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import msgspec
import pytest
from httpx_sse import aconnect_sse

from backend.services.runs.runs import RunDetail
from tests.diagrams import diagram, edge, node
from tests.integration.flows import publish

pytestmark = pytest.mark.integration


async def test_the_stream_follows_a_run_to_its_end(client: httpx.AsyncClient, worker: Any) -> None:
    d = diagram(
        [
            node("start", "trigger.manual"),
            node("nap", "control.delay", seconds=1),
            node("s", "control.set", mapping={"n": "=1"}),
        ],
        [edge("start", "nap"), edge("nap", "s")],
    )
    wf = await publish(client, d)
    started = await client.post(f"/api/v1/workflows/{wf['id']}/runs", json={"input": {}})
    assert started.status_code == 201, started.text
    run_id = started.json()["id"]

    events = []
    async with aconnect_sse(client, "GET", f"/api/v1/runs/{run_id}/events") as source:
        assert source.response.status_code == 200
        assert source.response.headers["content-type"].startswith("text/event-stream")
        async for sse in source.aiter_sse():
            events.append(sse)
    assert events and {e.event for e in events} == {"update"}
    runs = [msgspec.json.decode(e.data, type=RunDetail) for e in events]
    assert runs[0].status not in ("succeeded", "failed", "cancelled", "timed_out")
    assert runs[-1].status == "succeeded"
    assert {r.id for r in runs} == {run_id}
    detail = await client.get(f"/api/v1/runs/{run_id}")
    assert events[-1].json() == detail.json()


async def test_an_unknown_or_malformed_run_is_a_problem(client: httpx.AsyncClient) -> None:
    missing = await client.get(f"/api/v1/runs/{uuid.uuid4()}/events")
    assert missing.status_code == 404, missing.text
    assert missing.headers["content-type"].startswith("application/problem+json")
    malformed = await client.get("/api/v1/runs/not-a-run/events")
    assert malformed.status_code == 400, malformed.text
    assert malformed.json()["errors"][0]["parameter"] == "run_id"


async def test_the_document_declares_the_stream_and_its_events(client: httpx.AsyncClient) -> None:
    document = (await client.get("/schema/openapi.json")).json()
    answer = document["paths"]["/api/v1/runs/{run_id}/events"]["get"]["responses"]["200"]
    assert set(answer["content"]) == {"text/event-stream"}
    media = answer["content"]["text/event-stream"]
    assert "schema" not in media
    assert media["x-itemSchema"] == {"$ref": "#/components/schemas/RunUpdateEvent"}
    update = document["components"]["schemas"]["RunUpdateEvent"]
    assert update["properties"]["event"]["const"] == "update"
    assert update["properties"]["data"] == {"$ref": "#/components/schemas/RunDetail"}
    assert set(update["required"]) == {"event", "data"}
