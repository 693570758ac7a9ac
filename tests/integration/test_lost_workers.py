"""A lost worker's attempt (lease expired by the sweeper) uses up no retry, and a step
whose workers are lost again and again fails with kind ``lease_expired`` instead of
running forever (backend/engine/unfinished_attempts.py), through the real use case and
PostgreSQL."""

from __future__ import annotations

import uuid

import httpx
import pytest
from sqlalchemy import text

from backend.engine.unfinished_attempts import MAX_LOST_LEASES
from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.flows import attempt_rows, publish

pytestmark = pytest.mark.integration

UNREACHED = "http://127.0.0.1:9/never-called"  # no worker runs the step


async def _run_with_ready_step(
    client: httpx.AsyncClient, runtime: Runtime, max_attempts: int
) -> uuid.UUID:
    """A run of start -> call (an HTTP step with ``max_attempts``) whose ``call`` is ready
    and no job is queued: this test plays the worker and the sweeper."""
    retry = {"max_attempts": max_attempts, "initial_interval": 0, "jitter": 0}
    nodes = [
        node("start", "trigger.manual"),
        node("call", "http.request", method="POST", url=UNREACHED, retry=retry),
    ]
    wf = await publish(client, diagram(nodes, [edge("start", "call")]))
    answer = await client.post(f"/api/workflows/{wf['id']}/runs", json={"input": {}})
    await runtime.redis.flushall()
    return uuid.UUID(answer.json()["run_id"])


async def _lose_worker(runtime: Runtime, run_id: uuid.UUID) -> None:
    """Claim ``call`` as a worker would, then expire its lease as the sweeper does."""
    steps = runtime.execution.steps
    claimed = await steps.claim(run_id, "call")
    assert claimed is not None
    assert await steps.expire_lease(run_id, "call", claimed.attempt_id, claimed.token)


async def _run_status(runtime: Runtime, run_id: uuid.UUID) -> tuple[str, str, str | None]:
    async with runtime.engine.connect() as conn:
        row = (
            await conn.execute(
                text(
                    "select r.status, s.status, s.error->>'kind' from runs r join step_runs s"
                    " on s.run_id = r.id and s.step_id = 'call' where r.id = :id"
                ),
                {"id": run_id},
            )
        ).one()
    return row[0], row[1], row[2]


async def test_lost_worker_uses_up_no_retry(client: httpx.AsyncClient, runtime: Runtime) -> None:
    run_id = await _run_with_ready_step(client, runtime, max_attempts=1)
    await _lose_worker(runtime, run_id)
    assert (await _run_status(runtime, run_id))[1] == "ready"
    # the one attempt the policy allows is still there: a failure now fails the step
    claimed = await runtime.execution.steps.claim(run_id, "call")
    assert claimed is not None and claimed.number == 2
    rows = [row[1:] for row in await attempt_rows(runtime, str(run_id))]
    assert rows == [(1, "expired", "lease_expired"), (2, "running", None)]


async def test_step_whose_workers_keep_dying_fails(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    run_id = await _run_with_ready_step(client, runtime, max_attempts=10)
    for _ in range(MAX_LOST_LEASES):
        await _lose_worker(runtime, run_id)
    assert await _run_status(runtime, run_id) == ("failed", "failed", "lease_expired")
    assert await runtime.execution.steps.claim(run_id, "call") is None
    rows = [row[1:] for row in await attempt_rows(runtime, str(run_id))]
    assert rows == [(n, "expired", "lease_expired") for n in range(1, MAX_LOST_LEASES + 1)]
