"""CloudEvents on a webhook end to end (real PostgreSQL, Redis and arq worker): binary,
structured and batched modes, one run per event, a repeated event deduplicated by
``source`` and ``id``, invalid events refused with 400 and no run, the test URL."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from cloudevents.core.bindings.http import to_binary_event, to_structured_event
from cloudevents.core.v1.event import CloudEvent
from sqlalchemy import text

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail

pytestmark = pytest.mark.integration

SOURCE = "https://shop.example.com/orders"


def order_event(event_id: str, order: int, **extra: Any) -> CloudEvent:
    return CloudEvent(
        {
            "id": event_id,
            "source": SOURCE,
            "type": "com.example.order.created",
            "datacontenttype": "application/json",
            "subject": f"order {order}",
            **extra,
        },
        {"order": order},
    )


def ce_pipeline(**hook: Any) -> dict[str, Any]:
    """CloudEvents webhook -> Set {order, kind} from the event."""
    return diagram(
        [
            node("hook", "trigger.webhook", cloudevents=True, **hook),
            node("set_1", "control.set", mapping={"order": "=data.order", "kind": "=type"}),
        ],
        [edge("hook", "set_1")],
    )


async def count(runtime: Runtime, sql: str = "select count(*) from runs") -> int:
    async with runtime.engine.connect() as conn:
        return int((await conn.execute(text(sql))).scalar_one())


async def post_binary(client: httpx.AsyncClient, path: str, event: CloudEvent) -> httpx.Response:
    message = to_binary_event(event)
    return await client.post(path, content=message.body, headers=message.headers)


async def post_structured(
    client: httpx.AsyncClient, path: str, event: CloudEvent
) -> httpx.Response:
    message = to_structured_event(event)
    return await client.post(path, content=message.body, headers=message.headers)


async def test_binary_mode_starts_a_run_with_the_event(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(client, ce_pipeline())
    r = await post_binary(client, wf["webhook_path"], order_event("e-1", 17, traceparent="00-a"))
    assert r.status_code == 202, r.text
    assert r.headers["location"] == r.json()["status_url"]
    run_id = r.json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "succeeded"
    detail = await run_detail(client, run_id)
    event = detail["input"]
    assert {k: event[k] for k in ("specversion", "id", "source", "type", "subject")} == {
        "specversion": "1.0",
        "id": "e-1",
        "source": SOURCE,
        "type": "com.example.order.created",
        "subject": "order 17",
    }
    assert event["data"] == {"order": 17}
    assert event["datacontenttype"] == "application/json"
    assert event["extensions"] == {"traceparent": "00-a"}
    assert event["time"].endswith("Z")
    assert detail["output"] == {"order": 17, "kind": "com.example.order.created"}


async def test_structured_mode_and_a_repeated_event(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = await publish(client, ce_pipeline())
    first = await post_structured(client, wf["webhook_path"], order_event("e-2", 2))
    assert first.status_code == 202, first.text
    # the same source and id again, now in binary mode: the same run
    again = await post_binary(client, wf["webhook_path"], order_event("e-2", 2))
    assert again.status_code == 202 and again.json()["run_id"] == first.json()["run_id"]
    assert await count(runtime) == 1
    # the same id from another source is another event
    other = await post_structured(
        client,
        wf["webhook_path"],
        CloudEvent({"id": "e-2", "source": "/elsewhere", "type": "t"}, None),
    )
    assert other.status_code == 202 and other.json()["run_id"] != first.json()["run_id"]
    assert await count(runtime) == 2
    async with runtime.engine.connect() as conn:
        inputs = (
            (await conn.execute(text("select input from runs order by created_at"))).scalars().all()
        )
    assert [i["source"] for i in inputs] == [SOURCE, "/elsewhere"]
    assert inputs[1]["data"] is None


async def test_batched_mode_starts_one_run_per_event(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(client, ce_pipeline())
    events = [
        {
            "specversion": "1.0",
            "id": f"b-{n}",
            "source": SOURCE,
            "type": "com.example.order.created",
            "data": {"order": n},
        }
        for n in range(3)
    ]
    headers = {"content-type": "application/cloudevents-batch+json"}
    r = await client.post(wf["webhook_path"], content=json.dumps(events), headers=headers)
    assert r.status_code == 202, r.text
    runs = r.json()["runs"]
    assert len(runs) == 3 and len({run["run_id"] for run in runs}) == 3
    assert await count(runtime) == 3  # all stored before the answer
    outputs = []
    for run in runs:
        assert await wait_for_run(runtime, run["run_id"]) == "succeeded"
        outputs.append((await run_detail(client, run["run_id"]))["output"]["order"])
    assert outputs == [0, 1, 2]
    # a batch delivered again (say, after a timeout) starts nothing new
    again = await client.post(wf["webhook_path"], content=json.dumps(events), headers=headers)
    assert [run["run_id"] for run in again.json()["runs"]] == [run["run_id"] for run in runs]
    empty = await client.post(wf["webhook_path"], content=b"[]", headers=headers)
    assert empty.status_code == 202 and empty.json() == {"runs": []}
    assert await count(runtime) == 3


async def test_invalid_cloudevents_get_400_and_no_run(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = await publish(client, ce_pipeline())
    path = wf["webhook_path"]
    missing_type = {"ce-specversion": "1.0", "ce-id": "x-1", "ce-source": SOURCE}
    r = await client.post(path, content=b"{}", headers=missing_type)
    assert r.status_code == 400
    assert r.json()["detail"] == "not a valid CloudEvent: missing required header ce-type"
    assert r.json()["field"] == "body"
    batch = [
        {"specversion": "1.0", "id": "ok", "source": SOURCE, "type": "t"},
        {"specversion": "1.0", "id": "bad", "source": SOURCE},
    ]
    r = await client.post(
        path,
        content=json.dumps(batch),
        headers={"content-type": "application/cloudevents-batch+json"},
    )
    assert r.status_code == 400
    assert r.json()["detail"].startswith("event 1 of the batch: not a valid CloudEvent")
    r = await client.post(path, json={"order": 1})  # plain JSON is not a CloudEvent
    assert r.status_code == 400 and "not a CloudEvent" in r.json()["detail"]
    assert await count(runtime) == 0
    rejected = await count(
        runtime, "select count(*) from webhook_deliveries where status_code = 400"
    )
    assert rejected == 3


async def test_a_webhook_without_cloudevents_keeps_taking_requests(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = await publish(client, diagram([node("hook", "trigger.webhook")], []))
    r = await post_binary(client, wf["webhook_path"], order_event("e-9", 9))
    assert r.status_code == 202
    again = await post_binary(client, wf["webhook_path"], order_event("e-9", 9))
    assert again.json()["run_id"] != r.json()["run_id"]  # no CloudEvents dedupe
    async with runtime.engine.connect() as conn:
        stored = (await conn.execute(text("select input from runs limit 1"))).scalar_one()
    assert stored["body"] == {"order": 9} and stored["headers"]["ce-id"] == "e-9"


async def test_the_test_url_keeps_the_first_event(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = (await client.post("/api/workflows", json={"name": "Draft"})).json()
    r = await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": ce_pipeline()})
    assert r.json()["ok"], r.json()
    info = (await client.get(f"/api/workflows/{wf['id']}/webhook")).json()
    test_path = "/hooks/test/" + info["test_url"].split("/hooks/test/", 1)[1]
    assert (await client.post(f"/api/workflows/{wf['id']}/webhook/listen")).json()["listening"]
    r = await post_binary(client, test_path, order_event("t-1", 5))
    assert r.status_code == 200, r.text
    call = (await client.get(f"/api/workflows/{wf['id']}/webhook/test-call")).json()
    assert call["input"]["id"] == "t-1" and call["input"]["data"] == {"order": 5}
    assert await count(runtime) == 0
