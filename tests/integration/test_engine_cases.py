"""Engine cases and flow nodes on real PostgreSQL, Redis and an arq worker."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, join_after_dead_branch, join_fan_out, node
from tests.http_sink import HttpSink, Recorded
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, start_manual, steps_by_id

pytestmark = pytest.mark.integration


def _retrying_call(url: str) -> dict[str, Any]:
    retry = {"max_attempts": 5, "initial_interval": 5, "jitter": 0, "backoff_coefficient": 1}
    return diagram(
        [
            node("start", "trigger.manual"),
            node("call", "http.request", method="POST", url=url, body="=$", retry=retry),
        ],
        [edge("start", "call")],
    )


async def test_engine_retry_no_duplicate(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    # A: the endpoint answers 200 at once: one call, one attempt.
    wf = await publish(client, _retrying_call(sink.url))
    run_id = await start_manual(client, wf, {"order": 1})
    assert await wait_for_run(runtime, run_id) == "succeeded"
    assert len(sink.requests) == 1
    assert [
        a["status"] for a in steps_by_id(await run_detail(client, run_id))["call"]["attempts"]
    ] == ["succeeded"]

    # B: stores the record, answers 500 on the first call and 200 after.
    sink.requests.clear()
    stored: list[Any] = []

    def flaky(request: Recorded, n: int) -> tuple[int, Any]:
        stored.append(request.json())
        return (500, {"error": "try later"}) if n == 1 else (200, {"call": n})

    sink.handler = flaky
    run_id = await start_manual(client, wf, {"order": 2})
    assert await wait_for_run(runtime, run_id, timeout=30) == "succeeded"
    assert len(sink.requests) == 2
    keys = {r.headers["idempotency-key"] for r in sink.requests}
    assert keys == {f"{run_id}:call"}
    detail = await run_detail(client, run_id)
    call = steps_by_id(detail)["call"]
    assert [a["status"] for a in call["attempts"]] == ["failed", "succeeded"]
    assert detail["output"]["body"] == {"call": 2}


def _child(wait_first: bool) -> dict[str, Any]:
    nodes = [
        node("start", "trigger.manual"),
        node("boom", "control.stop_error", message="boom"),
    ]
    edges = [edge("start", "boom")]
    if wait_first:
        nodes.insert(1, node("nap", "control.delay", seconds=1))
        edges = [edge("start", "nap"), edge("nap", "boom")]
    return diagram(nodes, edges)


@pytest.mark.parametrize("wait_first", [True, False], ids=["after-wait", "before-wait"])
async def test_engine_subworkflow_failure_after_wait(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, wait_first: bool
) -> None:
    child = await publish(client, _child(wait_first))
    parent = await publish(
        client,
        diagram(
            [
                node("start", "trigger.manual"),
                node("call", "control.subworkflow", workflow_id=child["id"]),
                node("set", "control.set", mapping={"ran": True}),
            ],
            [edge("start", "call"), edge("call", "set")],
        ),
    )
    run_id = await start_manual(client, parent, {})
    if wait_first:
        assert (await run_detail(client, run_id))["status"] == "waiting"
    assert await wait_for_run(runtime, run_id) == "failed"
    steps = steps_by_id(await run_detail(client, run_id))
    error = steps["call"]["error"]
    assert error["message"] == "boom" and error["kind"] == "child_failed"
    child_detail = await run_detail(client, error["child_run_id"])
    assert child_detail["status"] == "failed"
    assert steps["set"]["status"] != "succeeded"


async def test_engine_loop_empty(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    sink.handler = lambda r, _: (200, [] if r.json()["item"] == 2 else {"ok": True})
    body = await publish(
        client,
        diagram(
            [
                node("start", "trigger.manual"),
                node("call", "http.request", method="POST", url=sink.url, body="=$"),
                node("result", "control.set", mapping={"r": "=body"}),
            ],
            [edge("start", "call"), edge("call", "result")],
        ),
    )
    parent = await publish(
        client,
        diagram(
            [
                node("start", "trigger.manual"),
                node("loop", "control.foreach", items="=items", workflow_id=body["id"]),
                node("done", "control.set", mapping={"results": "=$"}),
            ],
            [edge("start", "loop"), edge("loop", "done")],
        ),
    )
    run_id = await start_manual(client, parent, {"items": [1, 2, 3]})
    assert await wait_for_run(runtime, run_id) == "succeeded"
    detail = await run_detail(client, run_id)
    expected = [{"r": {"ok": True}}, {"r": []}, {"r": {"ok": True}}]
    assert steps_by_id(detail)["loop"]["output"] == expected
    assert detail["output"] == {"results": expected}
    assert sorted(r.json()["item"] for r in sink.requests) == [1, 2, 3]

    run_id = await start_manual(client, parent, {"items": []})
    assert await wait_for_run(runtime, run_id) == "succeeded"
    assert (await run_detail(client, run_id))["output"] == {"results": []}
    assert len(sink.requests) == 3


async def test_delay_is_a_durable_timer_holding_no_worker(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(
        client,
        diagram(
            [
                node("start", "trigger.manual"),
                node("nap", "control.delay", seconds=1),
                node("after", "control.set", mapping={"woke": True}),
            ],
            [edge("start", "nap"), edge("nap", "after")],
        ),
    )
    run_id = await start_manual(client, wf, {})
    async with runtime.engine.connect() as conn:
        row = (
            await conn.execute(
                text(
                    "select s.status, s.not_before > now(), r.status from step_runs s"
                    " join runs r on r.id = s.run_id where s.run_id = :id and s.step_id = 'nap'"
                ),
                {"id": run_id},
            )
        ).one()
    assert tuple(row) == ("ready", True, "waiting")
    assert await wait_for_run(runtime, run_id) == "succeeded"
    assert (await run_detail(client, run_id))["output"] == {"woke": True}


async def test_pause_and_resume_a_run(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(
        client,
        diagram(
            [
                node("start", "trigger.manual"),
                node("nap", "control.delay", seconds=0.5),
                node("after", "control.set", mapping={"done": True}),
            ],
            [edge("start", "nap"), edge("nap", "after")],
        ),
    )
    run_id = await start_manual(client, wf, {})
    r = await client.post(f"/api/runs/{run_id}/pause")
    assert r.status_code == 200, r.text
    await asyncio.sleep(1.2)
    detail = await run_detail(client, run_id)
    assert detail["status"] == "paused"
    assert steps_by_id(detail)["nap"]["status"] == "ready"
    assert (await client.post(f"/api/runs/{run_id}/pause")).status_code == 409
    assert (await client.post(f"/api/runs/{run_id}/resume")).status_code == 200
    assert await wait_for_run(runtime, run_id) == "succeeded"
    assert (await client.post(f"/api/runs/{run_id}/resume")).status_code == 409


async def test_engine_join_concurrent_runs(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(client, join_fan_out([2.0, 0.0, 1.0, 0.0], respond="respond_node"))
    answers = await asyncio.gather(
        *(client.post(wf["webhook_path"], json={"n": n}) for n in (1, 2, 3))
    )
    for n, answer in zip((1, 2, 3), answers, strict=True):
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert sorted(p["part"] for p in body) == [1, 2, 3, 4]
        assert {p["n"] for p in body} == {n}
    async with runtime.engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "select r.status, s.status, r.input->'body'->>'n' from runs r join step_runs s"
                    " on s.run_id = r.id and s.step_id = 'join'"
                )
            )
        ).all()
    assert sorted(tuple(r) for r in rows) == [
        ("succeeded", "succeeded", "1"),
        ("succeeded", "succeeded", "2"),
        ("succeeded", "succeeded", "3"),
    ]


@pytest.mark.parametrize("x", [1, 2])
async def test_engine_join_dead_branch(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, x: int
) -> None:
    wf = await publish(client, join_after_dead_branch())
    r = await client.post(wf["webhook_path"], json={"x": x})
    run_id = r.json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "succeeded"
    detail = await run_detail(client, run_id)
    steps = steps_by_id(detail)
    assert steps["join"]["status"] == "succeeded" and steps["after"]["status"] == "succeeded"
    joined = detail["output"]["joined"]
    assert joined["hook"]["body"] == {"x": x}
    if x == 1:
        assert joined["set_a"] == {"a": "yes"}
    else:
        assert "set_a" not in joined and steps["set_a"]["status"] == "skipped"


@pytest.mark.parametrize("a_first", [True, False], ids=["a-on-input-1", "b-on-input-1"])
async def test_engine_join_wiring_symmetry(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink, a_first: bool
) -> None:
    sink.response = []  # branch A: an action whose output is an empty list
    join_edges = [edge("a", "join"), edge("b", "join")]
    wf = await publish(
        client,
        diagram(
            [
                node("start", "trigger.manual"),
                node("a", "http.request", url=sink.url),
                node("wait_b", "control.delay", seconds=0.2),
                node("b", "control.set", mapping={"b": 1}),
                node("join", "control.join", mode="all"),
            ],
            [
                edge("start", "a"),
                edge("start", "wait_b"),
                edge("wait_b", "b"),
                *(join_edges if a_first else join_edges[::-1]),
            ],
        ),
    )
    run_id = await start_manual(client, wf, {})
    assert await wait_for_run(runtime, run_id) == "succeeded"
    steps = steps_by_id(await run_detail(client, run_id))
    assert steps["join"]["started_at"] >= steps["b"]["finished_at"]
    assert steps["join"]["output"] == {"a": steps["a"]["output"], "b": {"b": 1}}
    assert steps["a"]["output"]["body"] == []
