"""Runs end to end on real PostgreSQL, Redis and an arq worker: every node type of the skeleton."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node, order_pipeline
from tests.http_sink import HttpSink
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, steps_by_id

pytestmark = pytest.mark.integration


async def test_webhook_set_if_http_true_branch(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    wf = await publish(client, order_pipeline(sink.url + "/orders"))
    r = await client.post(wf["webhook_path"], json={"name": "Ada", "qty": 3, "price": 50})
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    assert r.json()["status_url"].endswith(f"/api/v1/runs/{run_id}")
    assert await wait_for_run(runtime, run_id) == "succeeded"

    assert len(sink.requests) == 1
    sent = sink.requests[0]
    assert sent.method == "POST" and sent.path == "/orders"
    assert sent.json() == {"customer": "Ada", "total": 150, "source": "shop"}
    assert sent.headers["idempotency-key"] == f"{run_id}:http_1"

    detail = await run_detail(client, run_id)
    steps = steps_by_id(detail)
    assert steps["webhook"]["output"]["body"] == {"name": "Ada", "qty": 3, "price": 50}
    assert steps["set_1"]["output"] == {"customer": "Ada", "total": 150, "source": "shop"}
    assert steps["if_1"]["ports"] == ["true"]
    assert steps["http_1"]["status"] == "succeeded"
    assert steps["http_1"]["output"]["status"] == 200
    assert steps["http_1"]["output"]["body"] == {"ok": True}
    assert [a["status"] for a in steps["http_1"]["attempts"]] == ["succeeded"]
    assert steps["respond_big"]["output"]["body"] == {"forwarded": 200}
    assert steps["respond_small"]["status"] == "skipped"
    assert detail["status"] == "succeeded"
    for sid in ("webhook", "set_1", "if_1", "http_1", "respond_big"):
        assert steps[sid]["duration_ms"] is not None


async def test_if_false_branch_skips_http(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    wf = await publish(client, order_pipeline(sink.url))
    r = await client.post(wf["webhook_path"], json={"name": "Bo", "qty": 1, "price": 5})
    run_id = r.json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "succeeded"
    steps = steps_by_id(await run_detail(client, run_id))
    assert steps["if_1"]["ports"] == ["false"]
    assert steps["http_1"]["status"] == "skipped"
    assert steps["respond_big"]["status"] == "skipped"
    assert steps["respond_small"]["output"]["body"] == {"forwarded": False, "total": 5}
    assert sink.requests == []


async def test_respond_to_webhook_waits_for_the_respond_step(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    wf = await publish(client, order_pipeline(sink.url, respond="respond_node"))
    r = await client.post(wf["webhook_path"], json={"name": "Ada", "qty": 3, "price": 50})
    assert r.status_code == 201, r.text
    assert r.json() == {"forwarded": 200}
    r = await client.post(wf["webhook_path"], json={"name": "Bo", "qty": 1, "price": 5})
    assert r.status_code == 200
    assert r.json() == {"forwarded": False, "total": 5}


async def test_manual_trigger_runs_from_the_api(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    d = diagram(
        [
            node("start", "trigger.manual"),
            node("set_1", "control.set", mapping={"greeting": '="Hello " & name', "n": 2}),
        ],
        [edge("start", "set_1")],
    )
    wf = await publish(client, d)
    r = await client.post(f"/api/workflows/{wf['id']}/runs", json={"input": {"name": "Ada"}})
    assert r.status_code == 201, r.text
    run_id = r.json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "succeeded"
    detail = await run_detail(client, run_id)
    assert detail["trigger"] == "manual"
    assert detail["output"] == {"greeting": "Hello Ada", "n": 2}


async def test_failing_http_call_fails_the_step_with_the_error(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    sink.status = 500
    sink.response = {"error": "database on fire"}
    d = diagram(
        [
            node("hook", "trigger.webhook"),
            node("call", "http.request", method="POST", url=sink.url, body="=body"),
        ],
        [edge("hook", "call")],
    )
    wf = await publish(client, d)
    run_id = (await client.post(wf["webhook_path"], json={"a": 1})).json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "failed"
    detail = await run_detail(client, run_id)
    call = steps_by_id(detail)["call"]
    assert call["status"] == "failed"
    assert "500" in call["error"]["message"]
    assert call["attempts"][0]["status"] == "failed"
    assert detail["error"]["step_id"] == "call"


async def test_unreachable_host_fails_with_a_clear_message(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    d = diagram(
        [
            node("hook", "trigger.webhook"),
            node("call", "http.request", url="http://127.0.0.1:9/nothing", request_timeout=2),
        ],
        [edge("hook", "call")],
    )
    wf = await publish(client, d)
    run_id = (await client.post(wf["webhook_path"], json={})).json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "failed"
    call = steps_by_id(await run_detail(client, run_id))["call"]
    assert "127.0.0.1:9" in call["error"]["message"]


async def count_runs(runtime: Runtime) -> int:
    async with runtime.engine.connect() as conn:
        return int((await conn.execute(text("select count(*) from runs"))).scalar_one())


@pytest.mark.parametrize("body", [b"{bad", b'{"a": 1', b"[1, 2"])
async def test_malformed_webhook_body_is_rejected_and_no_run_stored(
    client: httpx.AsyncClient, runtime: Runtime, body: bytes
) -> None:
    wf = await publish(client, diagram([node("hook", "trigger.webhook")], []))
    r = await client.post(
        wf["webhook_path"], content=body, headers={"content-type": "application/json"}
    )
    assert r.status_code == 400
    assert "malformed JSON" in r.json()["detail"] and "line 1" in r.json()["detail"]
    assert await count_runs(runtime) == 0


async def test_webhook_errors_unknown_token_and_oversized_body(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    assert (await client.post("/hooks/not-a-token", json={})).status_code == 404
    wf = await publish(client, diagram([node("hook", "trigger.webhook")], []))
    big = json.dumps({"x": "a" * (runtime.settings.webhook_max_body + 10)})
    r = await client.post(
        wf["webhook_path"], content=big, headers={"content-type": "application/json"}
    )
    assert r.status_code == 413
    assert await count_runs(runtime) == 0


async def test_empty_json_body_starts_a_run_with_empty_object(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(client, diagram([node("hook", "trigger.webhook")], []))
    for body in (b"", b"   "):
        r = await client.post(
            wf["webhook_path"], content=body, headers={"content-type": "application/json"}
        )
        assert r.status_code == 202
        run_id = r.json()["run_id"]
        assert await wait_for_run(runtime, run_id) == "succeeded"
        detail = await run_detail(client, run_id)
        assert detail["input"]["body"] == {}


async def test_webhook_query_and_headers_shape(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(client, diagram([node("hook", "trigger.webhook")], []))
    r = await client.post(
        wf["webhook_path"] + "?tag=a&tag=b&one=1", json={"k": True}, headers={"X-Custom": "Yes"}
    )
    run_id = r.json()["run_id"]
    await wait_for_run(runtime, run_id)
    run_input = (await run_detail(client, run_id))["input"]
    assert run_input["query"] == {"tag": ["a", "b"], "one": "1"}
    assert run_input["headers"]["x-custom"] == "Yes"
    assert run_input["method"] == "POST"


async def test_run_pages_render(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    wf = await publish(client, order_pipeline(sink.url))
    run_id = (
        await client.post(wf["webhook_path"], json={"name": "Ada", "qty": 3, "price": 50})
    ).json()["run_id"]
    await wait_for_run(runtime, run_id)
    page = await client.get(f"/runs/{run_id}")
    assert page.status_code == 200 and 'data-step-id="http_1"' in page.text
    assert (await client.get("/runs")).status_code == 200
    assert (await client.get(f"/workflows/{wf['id']}/designer")).status_code == 200
    assert (await client.get("/workflows")).status_code == 200


async def test_runs_page_filters_by_workflow_and_status_query_parameters(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    """``/runs?workflow_id=…&status=…`` are query parameters of the runs page."""
    first = await publish(client, diagram([node("hook", "trigger.webhook")], []))
    second = await publish(client, diagram([node("hook", "trigger.webhook")], []))
    run_a = (await client.post(first["webhook_path"], json={})).json()["run_id"]
    run_b = (await client.post(second["webhook_path"], json={})).json()["run_id"]
    assert await wait_for_run(runtime, run_a) == "succeeded"
    assert await wait_for_run(runtime, run_b) == "succeeded"

    page = await client.get("/runs", params={"workflow_id": first["id"]})
    assert page.status_code == 200
    assert f'data-run-id="{run_a}"' in page.text and f'data-run-id="{run_b}"' not in page.text
    page = await client.get("/runs", params={"workflow_id": second["id"], "status": "succeeded"})
    assert f'data-run-id="{run_b}"' in page.text and f'data-run-id="{run_a}"' not in page.text
    page = await client.get("/runs", params={"workflow_id": second["id"], "status": "failed"})
    assert f'data-run-id="{run_b}"' not in page.text
    assert (await client.get("/runs", params={"workflow_id": "not-a-uuid"})).status_code == 400
