"""Shared case run-large-output: a 900 KB webhook body and a 5 MB step output are each
stored once, by reference; the run's API detail and page stay small and show previews with
download links; the engine still hands the whole value to the next step."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, set_settings, steps_by_id

pytestmark = pytest.mark.integration

MARKER = "$railyard.payload"


def big_list() -> list[dict[str, Any]]:
    """About 5 MB of JSON: 40,000 records."""
    return [{"id": i, "name": f"item {i}", "note": "n" * 90} for i in range(40_000)]


def webhook_body() -> dict[str, Any]:
    """About 900 KB of JSON."""
    return {"records": [{"i": i, "text": "t" * 80} for i in range(9_000)], "source": "crm"}


def pipeline(url: str) -> dict[str, Any]:
    """Webhook -> HTTP Request (GET, answers the big list) -> Set n = $count(body)."""
    return diagram(
        [
            node("hook", "trigger.webhook"),
            node("fetch", "http.request", method="GET", url=f"{url}/items"),
            node("count", "control.set", mapping={"n": "=$count(body)"}),
        ],
        [edge("hook", "fetch"), edge("fetch", "count")],
    )


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, separators=(",", ":")).encode()).hexdigest()


async def start_and_finish(client: httpx.AsyncClient, runtime: Runtime, wf: dict[str, Any]) -> str:
    """Start a run through the webhook; return its id once it succeeded."""
    r = await client.post(wf["webhook_path"], json={"small": True})
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    status = await wait_for_run(runtime, run_id, timeout=60)
    assert status == "succeeded", (await run_detail(client, run_id))["error"]
    return run_id


@pytest.mark.parametrize("admission", [False, True], ids=["one-statement-start", "admitted"])
async def test_run_large_output(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink, admission: bool
) -> None:
    items, body = big_list(), webhook_body()
    assert len(json.dumps(items)) > 5_000_000 and len(json.dumps(body)) > 900_000
    sink.response = items
    wf = await publish(client, pipeline(sink.url))
    if admission:  # a concurrency limit: the run is inserted queued, then admitted
        await set_settings(client, wf, max_concurrent_runs=2)
    r = await client.post(wf["webhook_path"], json=body)
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    status = await wait_for_run(runtime, run_id, timeout=60)
    assert status == "succeeded", (await run_detail(client, run_id))["error"]

    # the engine passed the whole 5 MB list on
    api = await client.get(f"/api/runs/{run_id}")
    assert api.status_code == 200
    detail = api.json()
    steps = steps_by_id(detail)
    assert steps["count"]["output"] == {"n": 40_000}

    # bounded API response and page
    assert len(api.content) < 200_000, len(api.content)
    page = await client.get(f"/runs/{run_id}")
    assert page.status_code == 200
    assert len(page.content) < 200_000, len(page.content)

    # previews with download links, wherever the large values appear
    fetched = steps["fetch"]["output"]["body"]
    assert fetched[MARKER] and fetched["summary"] == "list of 40000 items"
    assert fetched["bytes"] > 5_000_000 and len(fetched["preview"]) <= 1001
    assert fetched["preview"].startswith('[{"id":0,"name":"item 0"')
    assert steps["count"]["input"]["body"] == fetched
    # the body's large part (its records) is the payload; small parts stay inline
    received = detail["input"]["body"]["records"]
    assert received[MARKER] and received["summary"] == "list of 9000 items"
    assert detail["input"]["body"]["source"] == "crm" and detail["input"]["method"] == "POST"
    assert steps["hook"]["output"]["body"]["records"] == received
    assert steps["fetch"]["input"]["body"]["records"] == received
    # absolute, on the base URL (docs/api.md, "Answers")
    assert fetched["download_url"].startswith(f"http://testserver.local/api/v1/runs/{run_id}/")
    assert fetched["download_url"] in page.text and received["download_url"] in page.text
    assert "Download whole value" in page.text

    # the downloads return the whole values
    got = await client.get(fetched["download_url"])
    assert got.status_code == 200
    assert got.headers["content-type"].startswith("application/json")
    assert "attachment" in got.headers["content-disposition"]
    assert got.json() == items
    assert (await client.get(received["download_url"])).json() == body["records"]

    # each large value stored once; no column holds a large value
    async with runtime.engine.connect() as conn:
        stored = (await conn.execute(text("select sha256 from payloads"))).scalars().all()
        widest = (
            (
                await conn.execute(
                    text(
                        "select max(octet_length(concat(input::text, output::text, error::text)))"
                        " from step_runs where run_id = :id"
                        " union all select max(octet_length(concat(input::text, config::text,"
                        " output::text))) from attempts where run_id = :id"
                        " union all select octet_length(concat(input::text, output::text))"
                        " from runs where id = :id"
                    ),
                    {"id": run_id},
                )
            )
            .scalars()
            .all()
        )
    assert sorted(stored) == sorted([digest(items), digest(body["records"])])
    assert max(widest) < 10_000, widest


async def test_large_value_download_is_checked_like_the_run(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    sink.response = big_list()[:4000]  # about 500 KB: over the limit
    wf = await publish(client, pipeline(sink.url))
    first, second = [await start_and_finish(client, runtime, wf) for _ in range(2)]
    url = steps_by_id(await run_detail(client, first))["fetch"]["output"]["body"]["download_url"]
    sha = url.rsplit("/", 1)[1]
    # the same value in two runs is one payload row, downloadable through either run
    assert (await client.get(f"/api/runs/{second}/values/{sha}")).status_code == 200
    async with runtime.engine.connect() as conn:
        assert (await conn.execute(text("select count(*) from payloads"))).scalar_one() == 1
    # a run that does not hold the value, a malformed digest: 404 with a message
    sink.response = {"small": True}
    other = await client.post(f"/api/workflows/{wf['id']}/runs", json={"input": {}})
    r = await client.get(f"/api/runs/{other.json()['run_id']}/values/{sha}")
    assert r.status_code == 404 and "has no value" in r.text
    assert (await client.get(f"/api/runs/{first}/values/not-a-digest")).status_code == 404
    # logged out: refused like the run itself
    async with httpx.AsyncClient(transport=client._transport, base_url=client.base_url) as anon:
        assert (await anon.get(url)).status_code == 401
        assert (await anon.get(f"/api/runs/{first}")).status_code == 401
