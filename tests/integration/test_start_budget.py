"""A start evaluates inline steps on the API only within its budget; a version whose
start ran out of it hands its inline work to a worker at once (docs/engine.md, "Limits").
Every step still completes exactly once."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from arq.constants import default_queue_name
from sqlalchemy import text

from backend.runtime import Runtime
from backend.services.runs.execution import inline_budget
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish

pytestmark = pytest.mark.integration

LONG = 500  # Set steps: 5-25 ms of evaluation here (10-50 µs each), far past SHORT_BUDGET
SHORT_BUDGET = 0.002  # seconds: what the long chain certainly overruns


def _chain(n: int, trigger: str = "trigger.webhook") -> dict[str, Any]:
    nodes = [node("hook", trigger)]
    edges = []
    for i in range(n):
        # the first step counts from 1 (its input is the trigger's), each next one adds 1
        count = "=1" if i == 0 else "=$.i + 1"
        nodes.append(node(f"s{i}", "control.set", mapping={"i": count}))
        edges.append(edge("hook" if i == 0 else f"s{i - 1}", f"s{i}"))
    return diagram(nodes, edges)


async def _start(client: httpx.AsyncClient, wf: dict[str, Any]) -> str:
    """A webhook call: the one-statement start."""
    r = await client.post(wf["webhook_path"], json={"i": 0})
    assert r.status_code == 202, r.text
    return str(r.json()["run_id"])


async def _start_manually(client: httpx.AsyncClient, wf: dict[str, Any]) -> str:
    """A manual start through the API: audited, so the locked start."""
    r = await client.post(f"/api/workflows/{wf['id']}/runs", json={"input": {"i": 0}})
    assert r.status_code == 201, r.text
    return str(r.json()["run_id"])


async def _stored(runtime: Runtime, run_id: str) -> tuple[str, uuid.UUID, dict[str, int]]:
    """(run status, version id, step status -> count) as stored."""
    async with runtime.engine.connect() as conn:
        status, version_id = (
            await conn.execute(
                text("select status, version_id from runs where id = :r"), {"r": run_id}
            )
        ).one()
        counts = (
            await conn.execute(
                text("select status, count(*) from step_runs where run_id = :r group by status"),
                {"r": run_id},
            )
        ).all()
    return status, version_id, {s: int(n) for s, n in counts}


async def _succeeded_events(runtime: Runtime, run_id: str) -> list[str]:
    async with runtime.engine.connect() as conn:
        rows = await conn.execute(
            text("select step_id from events where run_id = :r and kind = 'step.succeeded'"),
            {"r": run_id},
        )
        return [str(step_id) for (step_id,) in rows]


async def _output(runtime: Runtime, run_id: str) -> Any:
    async with runtime.engine.connect() as conn:
        return (
            await conn.execute(text("select output from runs where id = :r"), {"r": run_id})
        ).scalar_one()


@pytest.mark.parametrize(
    ("trigger", "start"),
    [("trigger.webhook", _start), ("trigger.manual", _start_manually)],
    ids=["one_statement_start", "locked_start"],
)
async def test_a_start_past_its_budget_is_continued_by_a_worker_and_remembered(
    client: httpx.AsyncClient,
    runtime: Runtime,
    worker_factory: Any,
    trigger: str,
    start: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a budget the chain overruns however fast the machine evaluates it
    monkeypatch.setattr(inline_budget, "INLINE_BUDGET_SECONDS", SHORT_BUDGET)
    wf = await publish(client, _chain(LONG, trigger))
    overruns = runtime.execution.starts.overruns

    first = await start(client, wf)
    status, version_id, counts = await _stored(runtime, first)
    # the API evaluated what fitted into its budget, left the next Set ready and queued
    # an advance for a worker
    assert status == "running"
    assert 1 < counts["succeeded"] < LONG + 1
    assert counts["ready"] == 1
    assert await runtime.redis.zcard(default_queue_name) == 1
    assert not overruns.remembers(version_id)  # once may be a hiccup

    second = await start(client, wf)
    status, _, counts = await _stored(runtime, second)
    assert (status, counts["ready"]) == ("running", 1)
    assert 1 < counts["succeeded"] < LONG + 1
    assert overruns.remembers(version_id)  # twice in a row: this version does not fit

    third = await start(client, wf)
    # the next start of the version evaluates one Set and hands the rest over at once
    assert await _stored(runtime, third) == ("running", version_id, {"succeeded": 2, "ready": 1})
    assert await runtime.redis.zcard(default_queue_name) == 3

    async with worker_factory():
        for run_id in (first, second, third):
            assert await wait_for_run(runtime, run_id, timeout=120) == "succeeded"
    for run_id in (first, second, third):
        assert await _output(runtime, run_id) == {"i": LONG}
        succeeded = await _succeeded_events(runtime, run_id)
        assert sorted(succeeded) == sorted(["hook", *(f"s{i}" for i in range(LONG))])
        # the steps the start left ready are stored as the worker evaluated them
        assert await _stored(runtime, run_id) == ("succeeded", version_id, {"succeeded": LONG + 1})


async def test_a_start_that_fits_its_budget_finishes_without_a_worker(
    client: httpx.AsyncClient, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a budget no busy machine runs out of: the test is about what fitting means
    monkeypatch.setattr(inline_budget, "INLINE_BUDGET_SECONDS", 60.0)
    wf = await publish(client, _chain(3))
    run_id = await _start(client, wf)
    status, version_id, counts = await _stored(runtime, run_id)
    assert (status, counts) == ("succeeded", {"succeeded": 4})
    assert await _output(runtime, run_id) == {"i": 3}
    assert await runtime.redis.zcard(default_queue_name) == 0
    assert not runtime.execution.starts.overruns.remembers(version_id)
