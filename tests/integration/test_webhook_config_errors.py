"""A Webhook trigger config its endpoint cannot serve (a value breaking its field's
constraint or type) never answers 500: publishing it is refused with 422 naming the node
and field, a published one stored before that check answers deliveries 503 naming the
field, and the designer's test URL answers a draft's with 422 naming the field."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from backend.services.triggers import webhooks as hooks
from tests.diagrams import diagram, node
from tests.integration.flows import publish

pytestmark = pytest.mark.integration


def hook(**config: Any) -> dict[str, Any]:
    return diagram([node("hook", "trigger.webhook", **config)], [])


async def count(runtime: Runtime, sql: str) -> int:
    async with runtime.engine.connect() as conn:
        return int((await conn.execute(text(sql))).scalar_one())


async def test_publishing_a_webhook_config_that_does_not_fit_answers_422(
    client: httpx.AsyncClient,
) -> None:
    for config, field in (({"tolerance": 0}, "tolerance"), ({"max_body": -1}, "max_body")):
        wf = (await client.post("/api/workflows", json={"name": "Bad hook"})).json()
        r = await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": hook(**config)})
        assert r.status_code == 200, r.text
        r = await client.post(f"/api/workflows/{wf['id']}/publish")
        assert r.status_code == 422, r.text
        assert f"invalid config: {field}" in r.text, r.text
        found = [d for d in r.json()["diagnostics"] if d["code"] == "invalid_config"]
        assert [(d["node_id"], d["field"]) for d in found] == [("hook", field)]
        assert (await client.get(f"/api/workflows/{wf['id']}")).json()["active_version"] is None


async def test_a_stored_published_config_that_does_not_fit_answers_503_naming_the_field(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = await publish(client, hook())
    async with runtime.engine.begin() as conn:  # published before publish checked values
        await conn.execute(
            text(
                "update workflow_versions set graph = jsonb_set(graph,"
                " '{steps,0,config,tolerance}', '0') where workflow_id = :id"
            ),
            {"id": wf["id"]},
        )
    hooks.clear_endpoint_cache()
    r = await client.post(wf["webhook_path"], json={"a": 1})
    assert r.status_code == 503, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    problem = r.json()
    assert problem["status"] == 503 and problem["field"] == "tolerance"
    assert "webhook configuration is invalid: tolerance" in problem["detail"]
    assert problem["instance"] == wf["webhook_path"]
    assert await count(runtime, "select count(*) from runs") == 0


async def test_the_test_url_answers_a_draft_config_that_does_not_fit_with_422(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = (await client.post("/api/workflows", json={"name": "Draft only"})).json()
    r = await client.put(
        f"/api/workflows/{wf['id']}/draft", json={"diagram": hook(rate_limit="many")}
    )
    info = (await client.get(f"/api/workflows/{wf['id']}/webhook")).json()
    test_path = "/hooks/test/" + info["test_url"].split("/hooks/test/", 1)[1]
    assert (await client.post(f"/api/workflows/{wf['id']}/webhook/listen")).json()["listening"]
    r = await client.post(test_path, json={"a": 1})
    assert r.status_code == 422, r.text
    problem = r.json()
    assert problem["field"] == "rate_limit"
    assert "the draft's webhook configuration is invalid: rate_limit" in problem["detail"]
    call = (await client.get(f"/api/workflows/{wf['id']}/webhook/test-call")).json()
    assert "rate_limit" in call["error"]
