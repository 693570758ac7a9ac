"""Field cases of the engine core: simultaneous starts under a concurrency limit, and
timeouts on flow steps (Sub-workflow, Delay, For-each)."""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.db.models import Run
from backend.db.run_store import load_state, lock_run, step_values
from backend.engine.outcomes import AttemptSucceeded
from backend.runtime import Runtime
from backend.services.runs.execution.step_changes import completion
from backend.services.runs.execution.transition import ChangeSet
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, set_settings, steps_by_id

pytestmark = pytest.mark.integration


@pytest.fixture
def slow_sink(request: pytest.FixtureRequest) -> Iterator[HttpSink]:
    """A local endpoint answering after ``request.param`` seconds."""
    sink = HttpSink(delay=request.param).start()
    yield sink
    sink.stop()


def _max_overlap(intervals: list[tuple[Any, Any]]) -> int:
    """The most intervals open at one instant (an end before a start at the same time)."""
    points = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    open_now = most = 0
    for _, step in points:
        open_now += step
        most = max(most, open_now)
    return most


@pytest.mark.parametrize(
    ("calls", "limit", "slow_sink"),
    [(12, 2, 0.3), (50, 1, 0.01)],
    indirect=["slow_sink"],
    ids=["12-calls-limit-2", "50-calls-limit-1"],
)
async def test_engine_concurrency_limit_burst(
    client: httpx.AsyncClient,
    runtime: Runtime,
    worker: Any,
    slow_sink: HttpSink,
    calls: int,
    limit: int,
) -> None:
    """Shared case engine-concurrency-limit-burst: every simultaneous webhook call is
    acknowledged and stored; at most ``limit`` runs are active at once; runs start in
    the order they were stored."""
    wf = await publish(
        client,
        diagram(
            [
                node("hook", "trigger.webhook"),
                node("call", "http.request", method="POST", url=slow_sink.url, body="=$.body"),
            ],
            [edge("hook", "call")],
        ),
    )
    await set_settings(client, wf, max_concurrent_runs=limit)

    answers = await asyncio.gather(
        *(client.post(wf["webhook_path"], json={"n": n}) for n in range(calls))
    )

    assert [a.status_code for a in answers] == [202] * calls, [a.text for a in answers]
    ids = [a.json()["run_id"] for a in answers]
    assert len(set(ids)) == calls
    for run_id in ids:
        assert await wait_for_run(runtime, run_id, timeout=60) == "succeeded"
    async with runtime.engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "select started_at, finished_at from runs where workflow_id = :wf"
                    " order by created_at, id"
                ),
                {"wf": wf["id"]},
            )
        ).all()
    assert len(rows) == calls
    assert _max_overlap([(r.started_at, r.finished_at) for r in rows]) <= limit
    starts = [r.started_at for r in rows]
    assert starts == sorted(starts)  # admitted in order of arrival (creation order)
    assert len(slow_sink.requests) == calls
    assert sorted(r.json()["n"] for r in slow_sink.requests) == list(range(calls))


async def _outcome(client: httpx.AsyncClient, run_id: str, step_id: str) -> dict[str, Any]:
    return steps_by_id(await run_detail(client, run_id))[step_id]


UNREACHED = "http://127.0.0.1:9/never-called"  # no worker runs the steps


async def test_fast_and_locked_completion_compute_the_same_change_set(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    """Completing an attempt from the state the worker wrote with its claim (the fast,
    one-statement path) and from the state loaded under the run lock (the locked path)
    computes the same change set; the write stores exactly that change set."""
    nodes = [node("start", "trigger.manual")]
    nodes += [node(f"s{i}", "http.request", method="POST", url=UNREACHED) for i in range(3)]
    wf = await publish(
        client,
        diagram(nodes, [edge("start", "s0"), edge("s0", "s1"), edge("s1", "s2")]),
    )
    run_id = uuid.UUID(
        (await client.post(f"/api/workflows/{wf['id']}/runs", json={"input": {}})).json()["run_id"]
    )
    await runtime.redis.flushall()  # no worker: this test drives the use case itself
    steps = runtime.execution.steps
    claimed = await steps.claim(run_id, "s0")
    assert claimed is not None and claimed.state is not None
    outcome = AttemptSucceeded({"n": 1})
    now = runtime.execution.clock.now()
    graph = await runtime.execution.env.store.graph(claimed.version_id)
    worker, lease = runtime.execution.env.worker, runtime.execution.env.lease_seconds

    held = copy.deepcopy(claimed.state)
    fast = ChangeSet.of(held, completion(graph, held, claimed, outcome, now, worker, lease))
    async with runtime.sessionmaker() as session, session.begin():
        run = await lock_run(session, run_id)
        assert run is not None
        loaded = await load_state(session, run)
    locked = ChangeSet.of(loaded, completion(graph, loaded, claimed, outcome, now, worker, lease))

    assert fast == locked
    assert sorted(fast.steps) == ["s0", "s1"]  # s0 succeeded, s1 claimed in the same write
    assert fast.start is not None and fast.start["step_id"] == "s1"
    assert [e[0] for e in fast.events] == ["step.succeeded", "step.ready", "step.started"]

    following = await steps.complete(run_id, claimed, outcome)  # the fast path writes it
    assert following is not None and following.step_id == "s1"
    async with runtime.sessionmaker() as session:
        run = await session.get(Run, run_id)
        assert run is not None
        stored = await load_state(session, run)
    for step_id, values in fast.steps.items():
        written = step_values(stored.steps[step_id])
        assert {k: v for k, v in written.items() if k not in TIMES} == {
            k: v for k, v in values.items() if k not in TIMES
        }


TIMES = ("started_at", "finished_at", "not_before")


async def _waiting_child(client: httpx.AsyncClient, seconds: float) -> dict[str, Any]:
    """A workflow that waits ``seconds`` on a durable timer, then returns its input."""
    return await publish(
        client,
        diagram(
            [node("start", "trigger.manual"), node("nap", "control.delay", seconds=seconds)],
            [edge("start", "nap")],
        ),
    )


@pytest.mark.parametrize("kind", ["subworkflow", "delay", "foreach"])
async def test_engine_timeout_flow_steps(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, kind: str
) -> None:
    """Shared case engine-timeout-flow-steps: a Sub-workflow, Delay or For-each step with
    a 1 s timeout whose wait takes longer ends ``failed`` with a timeout error, its child
    runs cancelled, and the run follows the step's error setting (here: fail the run;
    the Delay routes it to its error port instead)."""
    child = await _waiting_child(client, 6)
    config: dict[str, Any] = {"timeout": 1}
    if kind == "subworkflow":
        waiting = node("wait", "control.subworkflow", workflow_id=child["id"], **config)
    elif kind == "foreach":
        waiting = node("wait", "control.foreach", items="=items", workflow_id=child["id"], **config)
    else:
        waiting = node("wait", "control.delay", seconds=8, on_error="error_port", **config)
    after = node("after", "control.set", mapping={"ok": True})
    nodes = [node("start", "trigger.manual"), waiting, after]
    edges = [edge("start", "wait"), edge("wait", "after")]
    if kind == "delay":
        nodes.append(node("handled", "control.set", mapping={"handled": "=error.kind"}))
        edges.append(edge("wait", "handled", source_port="error"))
    wf = await publish(client, diagram(nodes, edges))

    run_id = (
        await client.post(f"/api/workflows/{wf['id']}/runs", json={"input": {"items": [1, 2]}})
    ).json()["run_id"]

    expected = "succeeded" if kind == "delay" else "failed"
    assert await wait_for_run(runtime, run_id, timeout=30) == expected
    detail = await run_detail(client, run_id)
    steps = steps_by_id(detail)
    assert steps["wait"]["status"] == "failed"
    assert steps["wait"]["error"] == {"message": "step timed out after 1 s", "kind": "timeout"}
    assert steps["after"]["status"] != "succeeded"
    if kind == "delay":
        assert steps["handled"]["output"] == {"handled": "timeout"}
        return
    assert detail["error"]["kind"] == "timeout"
    async with runtime.engine.connect() as conn:
        children = (
            (
                await conn.execute(
                    text("select status from runs where parent_run_id = :id"), {"id": run_id}
                )
            )
            .scalars()
            .all()
        )
    assert children and set(children) == {"cancelled"}  # case 1 and 3: children cancelled
