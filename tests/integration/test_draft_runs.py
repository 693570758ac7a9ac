"""Testing without publishing, through the API on PostgreSQL, Redis and an arq worker:
pinned data, "Test step", "Test workflow" (runs of an unlisted draft snapshot) and the
replay of an ended run from a step with its input edited."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, steps_by_id

pytestmark = pytest.mark.integration


def call_set_call(url: str) -> dict[str, Any]:
    """manual -> HTTP POST url/a (body = input) -> Set {"got": $.ok} -> HTTP POST url/b."""
    return diagram(
        [
            node("start", "trigger.manual"),
            node("call_a", "http.request", method="POST", url=url + "/a", body="=$"),
            node("set_1", "control.set", mapping={"got": "=$.body.ok", "n": "=$trigger.n"}),
            node("call_b", "http.request", method="POST", url=url + "/b", body="=$"),
        ],
        [edge("start", "call_a"), edge("call_a", "set_1"), edge("set_1", "call_b")],
    )


async def draft_workflow(client: httpx.AsyncClient, d: dict[str, Any]) -> str:
    """A workflow whose draft is ``d``, never published."""
    wf = (await client.post("/api/workflows", json={"name": "Draft only"})).json()
    r = await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": d})
    assert r.status_code == 200 and r.json()["ok"], r.text
    return str(wf["id"])


async def start_test(client: httpx.AsyncClient, wf_id: str, **body: Any) -> dict[str, Any]:
    r = await client.post(f"/api/workflows/{wf_id}/test-runs", json=body)
    assert r.status_code == 201, r.text
    return dict(r.json())


async def test_engine_pinned_data_and_test_step(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    wf_id = await draft_workflow(client, call_set_call(sink.url))
    pinned = {"status": 200, "body": {"ok": "pinned"}}
    r = await client.put(f"/api/workflows/{wf_id}/pins/call_a", json={"data": pinned})
    assert r.status_code == 200, r.text
    assert r.json()["data"] == pinned
    r = await client.put(f"/api/workflows/{wf_id}/pins/start", json={"data": {"n": 7}})
    assert r.status_code == 200, r.text
    pins = (await client.get(f"/api/workflows/{wf_id}/pins")).json()
    assert set(pins) == {"call_a", "start"}

    # Test step: only Set runs; the pinned HTTP step is not called, nothing after Set runs
    started = await start_test(client, wf_id, step_id="set_1")
    assert started["executes"] == []
    assert started["substituted"] == {"call_a": "pinned"}
    assert started["input_source"] == "pinned"
    status = await wait_for_run(runtime, started["run_id"])
    detail = await run_detail(client, started["run_id"])
    assert status == "succeeded", [(s["step_id"], s["status"], s["error"]) for s in detail["steps"]]
    assert detail["test"] is True and detail["trigger"] == "test"
    steps = steps_by_id(detail)
    assert set(steps) == {"start", "call_a", "set_1"}
    assert steps["set_1"]["output"] == {"got": "pinned", "n": 7}
    assert steps["call_a"]["output"] == pinned
    assert sink.requests == []
    page = await client.get(f"/runs/{started['run_id']}", headers={"accept": "text/html"})
    assert page.status_code == 200
    assert 'id="test-run-badge"' in page.text
    assert 'data-replay-step="set_1"' in page.text and 'data-replay-step="call_a"' in page.text

    # Test workflow: the unpinned HTTP step really runs, with the pinned step's data
    started = await start_test(client, wf_id)
    assert started["executes"] == ["call_b"]
    assert await wait_for_run(runtime, started["run_id"]) == "succeeded"
    assert [(q.path, q.json()) for q in sink.requests] == [("/b", {"got": "pinned", "n": 7})]

    # the draft was never published: no version listed, none active
    wf = (await client.get(f"/api/workflows/{wf_id}")).json()
    assert wf["active_version"] is None
    assert (await client.get(f"/api/workflows/{wf_id}/versions")).json() == []

    # unpinned: a test step takes the upstream step's output from the last run instead
    r = await client.delete(f"/api/v1/workflows/{wf_id}/pins/call_a")
    assert r.status_code == 204, r.text
    started = await start_test(client, wf_id, step_id="set_1", input={"n": 8})
    assert started["substituted"] == {"call_a": "last_run"}
    assert started["input_source"] == "given"
    assert await wait_for_run(runtime, started["run_id"]) == "succeeded"
    steps = steps_by_id(await run_detail(client, started["run_id"]))
    assert steps["set_1"]["output"] == {"got": "pinned", "n": 8}
    assert len(sink.requests) == 1  # nothing called again

    # publishing afterwards creates version 1: test snapshots take no number
    r = await client.post(f"/api/workflows/{wf_id}/publish")
    assert r.status_code == 201 and r.json()["version"]["number"] == 1, r.text


async def test_engine_test_run_bad_requests(
    client: httpx.AsyncClient, runtime: Runtime, sink: HttpSink
) -> None:
    wf_id = await draft_workflow(client, call_set_call(sink.url))
    r = await client.put(f"/api/workflows/{wf_id}/pins/nope", json={"data": 1})
    assert r.status_code == 400 and r.json()["field"] == "node_id", r.text
    deep: Any = 1
    for _ in range(100):
        deep = [deep]
    r = await client.put(f"/api/workflows/{wf_id}/pins/call_a", json={"data": deep})
    assert r.status_code == 400 and r.json()["field"].startswith("data"), r.text
    r = await client.delete(f"/api/v1/workflows/{wf_id}/pins/call_a")
    assert r.status_code == 404, r.text
    r = await client.post(f"/api/workflows/{wf_id}/pins/call_a/delete")  # deprecated form
    assert r.status_code == 404, r.text
    r = await client.post(f"/api/workflows/{wf_id}/test-runs", json={"step_id": "nope"})
    assert r.status_code == 400 and r.json()["field"] == "step_id", r.text
    r = await client.post(f"/api/workflows/{wf_id}/test-runs", json={"step_id": "start"})
    assert r.status_code == 400 and r.json()["field"] == "step_id", r.text
    r = await client.post(f"/api/workflows/{wf_id}/test-runs", json={"bogus": 1})
    assert r.status_code == 400, r.text
    broken = diagram(
        [node("start", "trigger.manual"), node("set_1", "control.set", mapping="=$.(")],
        [edge("start", "set_1")],
    )
    await client.put(f"/api/workflows/{wf_id}/draft", json={"diagram": broken})
    r = await client.post(f"/api/workflows/{wf_id}/test-runs", json={})
    assert r.status_code == 422 and r.json()["diagnostics"], r.text


async def test_engine_replay_from_step_with_edited_input(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    d = diagram(
        [
            node("start", "trigger.manual"),
            node("set_1", "control.set", mapping={"v": "=$.n"}),
            node("call", "http.request", method="POST", url=sink.url + "/c", body="=$"),
            node("after", "control.set", mapping={"sent": "=$.body.ok"}),
        ],
        [edge("start", "set_1"), edge("set_1", "call"), edge("call", "after")],
    )
    wf = await publish(client, d)
    r = await client.post(f"/api/workflows/{wf['id']}/runs", json={"input": {"n": 1}})
    original = r.json()["run_id"]
    assert await wait_for_run(runtime, original) == "succeeded"

    r = await client.post(
        f"/api/runs/{original}/replay", json={"step_id": "call", "input": {"v": 99}}
    )
    assert r.status_code == 201, r.text
    replay = r.json()["run_id"]
    assert await wait_for_run(runtime, replay) == "succeeded"
    assert [q.json() for q in sink.requests] == [{"v": 1}, {"v": 99}]
    detail = await run_detail(client, replay)
    assert detail["rerun_of"] == original and detail["trigger"] == "replay"
    steps = steps_by_id(detail)
    assert steps["set_1"]["output"] == {"v": 1}  # copied from the original, not re-run
    assert steps["call"]["input"] == {"v": 99}
    assert steps["after"]["status"] == "succeeded"
    assert replay in (await run_detail(client, original))["reruns"]

    # from the trigger: the run input itself is replaced
    r = await client.post(
        f"/api/runs/{original}/replay", json={"step_id": "start", "input": {"n": 5}}
    )
    assert r.status_code == 201, r.text
    assert await wait_for_run(runtime, r.json()["run_id"]) == "succeeded"
    assert sink.requests[-1].json() == {"v": 5}

    r = await client.post(f"/api/runs/{original}/replay", json={"step_id": "nope", "input": 1})
    assert r.status_code == 400 and r.json()["field"] == "step_id", r.text
    r = await client.post(f"/api/runs/{original}/replay", json={"step_id": "call"})
    assert r.status_code == 400, r.text  # input is required


async def test_engine_failed_test_run_starts_no_error_workflow(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    fallback = await publish(
        client,
        diagram(
            [node("start", "trigger.manual"), node("note", "control.set", mapping={"ctx": "=$"})],
            [edge("start", "note")],
        ),
    )
    failing = diagram(
        [node("start", "trigger.manual"), node("stop", "control.stop_error", message="boom")],
        [edge("start", "stop")],
    )
    main = await publish(client, failing)
    r = await client.patch(
        f"/api/workflows/{main['id']}", json={"settings": {"error_workflow_id": fallback["id"]}}
    )
    assert r.status_code == 200, r.text

    published = (await client.post(f"/api/workflows/{main['id']}/runs", json={})).json()
    assert await wait_for_run(runtime, published["run_id"]) == "failed"
    assert (await run_detail(client, published["run_id"]))["error_run_id"] is not None

    started = await start_test(client, main["id"])
    assert await wait_for_run(runtime, started["run_id"]) == "failed"
    await runtime.execution.drain()
    detail = await run_detail(client, started["run_id"])
    assert detail["test"] is True and detail["error_run_id"] is None
    fallback_runs = (await client.get(f"/api/runs?workflow_id={fallback['id']}")).json()
    assert len(fallback_runs) == 1  # the published run's error workflow only
