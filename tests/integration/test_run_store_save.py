"""``save_state(finish=..., start=...)``: one statement, fenced by the finished attempt's
token (backend/db/run_store.py). A stale token writes nothing at all.

No worker runs here: each run's first job is flushed from Redis, and the tests drive the
run store (and the step-execution use case's ``complete``) themselves.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest
from arq.constants import default_queue_name
from sqlalchemy import text

from backend.db.graphs import graph_for_version
from backend.db.run_store import (
    FinishedAttempt,
    NewAttempt,
    StaleAttempt,
    load_state,
    lock_run,
    save_state,
)
from backend.engine import orchestrator
from backend.engine.outcomes import AttemptSucceeded
from backend.runtime import Runtime
from backend.services.runs.execution.steps import claim_attempt
from tests.diagrams import diagram, edge, node
from tests.integration.flows import publish, start_manual

pytestmark = pytest.mark.integration

UNREACHED = "http://127.0.0.1:9/never-called"  # no worker runs the steps


def _chain(n: int) -> dict[str, Any]:
    nodes = [node("start", "trigger.manual")]
    edges = []
    previous = "start"
    for i in range(n):
        nodes.append(node(f"s{i}", "http.request", method="POST", url=UNREACHED))
        edges.append(edge(previous, f"s{i}"))
        previous = f"s{i}"
    return diagram(nodes, edges)


async def _run(client: httpx.AsyncClient, runtime: Runtime, steps: int) -> uuid.UUID:
    """A started run of ``steps`` chained HTTP steps; ``s0`` is ready, its job flushed."""
    wf = await publish(client, _chain(steps))
    run_id = await start_manual(client, wf, {})
    await runtime.redis.flushall()
    return uuid.UUID(run_id)


async def _claim(runtime: Runtime, run_id: uuid.UUID, step_id: str) -> NewAttempt:
    now = runtime.execution.clock.now()
    async with runtime.sessionmaker() as session, session.begin():
        run = await lock_run(session, run_id)
        assert run is not None
        state = await load_state(session, run)
        attempt = _new_attempt(state, step_id, run.id, now)
        await save_state(session, run, state, start=attempt)
    assert attempt.id is not None
    return attempt


def _new_attempt(state: Any, step_id: str, run_id: uuid.UUID, now: Any) -> NewAttempt:
    return claim_attempt(
        state,
        step_id,
        run_id=run_id,
        worker="test:1",
        input={},
        config={},
        now=now,
        lease_until=now + timedelta(seconds=30),
    )


async def _complete(
    runtime: Runtime, run_id: uuid.UUID, done: NewAttempt, token: str
) -> NewAttempt | None:
    """Complete ``done`` presenting ``token`` the way the engine does: record the success,
    claim the next step when one is ready, save all of it with one ``save_state``.
    Returns the claimed next attempt (``None`` when the run ended).

    Raises what ``save_state`` raises; a ``StaleAttempt`` is raised only after the
    transaction COMMITTED, so whatever the statement wrote would be visible.
    """
    now = runtime.execution.clock.now()
    finish = FinishedAttempt(done.id or 0, token, "succeeded", {"n": 1}, None, now)
    stale: StaleAttempt | None = None
    async with runtime.sessionmaker() as session, session.begin():
        run = await lock_run(session, run_id)
        assert run is not None
        graph = await graph_for_version(session, run.version_id)
        state = await load_state(session, run)
        ready = orchestrator.complete_action(graph, state, done.step_id, {"n": 1}, now)
        following = _new_attempt(state, ready[0], run.id, now) if ready else None
        try:
            await save_state(session, run, state, finish=finish, start=following)
        except StaleAttempt as exc:
            stale = exc  # commit anyway: the statement itself must have written nothing
    if stale is not None:
        raise stale
    return following


async def _snapshot(runtime: Runtime) -> dict[str, list[Any]]:
    """Every row of the tables a save writes."""
    tables = {
        "runs": "select * from runs order by id",
        "step_runs": "select * from step_runs order by run_id, step_id",
        "attempts": "select * from attempts order by id",
        "events": "select * from events order by id",
    }
    async with runtime.engine.connect() as conn:
        return {name: list((await conn.execute(text(sql))).all()) for name, sql in tables.items()}


async def _rows(runtime: Runtime, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    async with runtime.engine.connect() as conn:
        return [tuple(r) for r in (await conn.execute(text(sql), params)).all()]


async def test_completion_closes_attempt_claims_next_and_appends_events(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    run_id = await _run(client, runtime, steps=2)
    first = await _claim(runtime, run_id, "s0")
    events_before = await _rows(runtime, "select id from events where run_id = :r", r=run_id)

    following = await _complete(runtime, run_id, first, first.fencing_token)

    assert following is not None and following.step_id == "s1"
    assert following.id is not None and following.id != first.id
    attempts = await _rows(
        runtime,
        "select id, step_id, number, status, output, fencing_token, finished_at is not null"
        " from attempts where run_id = :r order by id",
        r=run_id,
    )
    assert attempts == [
        (first.id, "s0", 1, "succeeded", {"n": 1}, first.fencing_token, True),
        (following.id, "s1", 1, "running", None, following.fencing_token, False),
    ]
    steps = await _rows(
        runtime,
        "select step_id, status, output, attempts from step_runs"
        " where run_id = :r and step_id in ('s0', 's1') order by step_id",
        r=run_id,
    )
    assert steps == [("s0", "succeeded", {"n": 1}, 1), ("s1", "running", None, 1)]
    new_events = await _rows(
        runtime,
        "select kind, step_id from events where run_id = :r and not (id = any(:old)) order by id",
        r=run_id,
        old=[i for (i,) in events_before],
    )
    assert ("step.succeeded", "s0") in new_events
    assert ("step.started", "s1") in new_events
    assert new_events.index(("step.succeeded", "s0")) < new_events.index(("step.started", "s1"))


@pytest.mark.parametrize("steps", [1, 2], ids=["run-would-end", "next-step-claimed"])
@pytest.mark.parametrize("stale", ["wrong-token", "expired-attempt"])
async def test_stale_completion_writes_nothing(
    client: httpx.AsyncClient, runtime: Runtime, steps: int, stale: str
) -> None:
    run_id = await _run(client, runtime, steps=steps)
    first = await _claim(runtime, run_id, "s0")
    token = first.fencing_token
    if stale == "wrong-token":
        token = uuid.uuid4().hex
    else:  # the lease was taken over: the attempt is closed, the token no longer current
        async with runtime.engine.begin() as conn:
            await conn.execute(
                text("update attempts set status = 'expired' where id = :id"), {"id": first.id}
            )
    before = await _snapshot(runtime)

    with pytest.raises(StaleAttempt):
        await _complete(runtime, run_id, first, token)

    # nothing: no attempt closed or inserted, no step change, no event, run row unchanged
    assert await _snapshot(runtime) == before


async def _touch(runtime: Runtime, run_id: uuid.UUID) -> None:
    """Another committed write to the run (one event), as any other transaction makes."""
    async with runtime.sessionmaker() as session, session.begin():
        run = await lock_run(session, run_id)
        assert run is not None
        state = await load_state(session, run)
        state.emit("test.touched")
        await save_state(session, run, state)


@pytest.mark.parametrize("moved", [False, True], ids=["run-as-claimed", "run-moved-since"])
async def test_execution_discards_a_completion_its_fence_refuses(
    client: httpx.AsyncClient, runtime: Runtime, moved: bool
) -> None:
    run_id = await _run(client, runtime, steps=2)
    claimed = await runtime.execution.steps.claim(run_id, "s0")
    assert claimed is not None
    if moved:  # the run changed after the claim: the completion reloads it under the lock
        await _touch(runtime, run_id)
    # close the attempt behind the worker's back while its step still looks current, so
    # only the token fence of the one-statement write can refuse the completion
    async with runtime.engine.begin() as conn:
        await conn.execute(
            text("update attempts set status = 'expired' where id = :id"),
            {"id": claimed.attempt_id},
        )
    before = await _snapshot(runtime)

    follow_on = await runtime.execution.steps.complete(
        run_id, claimed, AttemptSucceeded({"late": True})
    )

    assert follow_on is None  # s1 not claimed for this worker
    assert await _snapshot(runtime) == before
    assert await runtime.redis.zcard(default_queue_name) == 0  # nothing dispatched either
