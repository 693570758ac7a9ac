"""How a run's row is stored (migration 0024_pg_cost, docs/performance.md "PostgreSQL's
share"): the engine's writes to a running run are HOT updates (no index entry written),
only its end updates the indexes, and the partial indexes over mostly-NULL columns still
serve every query that reads them, as index scans, over many ended runs.
"""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db import run_inserts, run_writes
from backend.engine.model import RunState, StepRecord
from backend.engine.ports import NewRun
from backend.engine.states import RunStatus, StepStatus
from backend.runtime import Runtime
from backend.services.operations import retention_events
from backend.services.workflows import workflows
from bench.common import manual_chain

pytestmark = pytest.mark.integration

HOT = "select pg_stat_get_xact_tuples_hot_updated('runs'::regclass)"
UPDATED = "select pg_stat_get_xact_tuples_updated('runs'::regclass)"


async def _version(session: AsyncSession, rt: Runtime) -> tuple[uuid.UUID, uuid.UUID]:
    """A published workflow with one Text template step: ``(workflow id, version id)``."""
    diagram = manual_chain([("t0", "data.template", {"template": "x"})])
    wf = await workflows.create_workflow(session, "storage", None)
    await workflows.save_draft(session, wf.id, diagram, rt.catalog)
    await workflows.publish(session, wf.id, rt.catalog, None)
    found = await session.execute(
        text("select id from workflow_versions where workflow_id = :w"), {"w": wf.id}
    )
    return wf.id, found.scalar_one()


async def _counts(session: AsyncSession) -> tuple[int, int]:
    """This transaction's ``(updates, HOT updates)`` of ``runs`` so far."""
    updated = (await session.execute(text(UPDATED))).scalar_one()
    hot = (await session.execute(text(HOT))).scalar_one()
    return int(updated), int(hot)


async def test_a_running_runs_writes_are_hot_and_its_end_is_not(runtime: Runtime) -> None:
    now = datetime.now(UTC)
    async with runtime.sessionmaker() as session, session.begin():
        workflow_id, version_id = await _version(session, runtime)
        run_id = uuid.uuid4()
        state = RunState(
            run_id=str(run_id),
            workflow_id=str(workflow_id),
            version_number=1,
            status=RunStatus.RUNNING,
            input={"n": 1},
            steps={"t0": StepRecord(step_id="t0", status=StepStatus.READY, not_before=now)},
            started_at=now,
        )
        state.touch("t0")
        new = NewRun(run_id, workflow_id, version_id, 1, "manual", {"n": 1})
        assert (await run_inserts.insert_run(session, new, state)).written
        before = await _counts(session)

        # a step's writes while the run goes on: its output, the revision
        rec = state.steps["t0"]
        rec.status, rec.output, rec.finished_at = StepStatus.SUCCEEDED, {"text": "x"}, now
        state.touch("t0")
        assert (await run_writes.write_state(session, run_id, state)).revision == 1
        assert (await run_writes.write_state(session, run_id, state)).revision == 2
        updated, hot = await _counts(session)
        assert (updated - before[0], hot - before[1]) == (2, 2)

        # the end changes the status and the end time: indexed, so not HOT; the output
        # changed, so the search vector is computed again
        state.status, state.finished_at = RunStatus.SUCCEEDED, now
        state.output = {"answer": "sunflower"}
        assert (await run_writes.write_state(session, run_id, state)).revision == 3
        assert await _counts(session) == (updated + 1, hot)
        vector = await session.execute(
            text("select search_vector::text from runs where id = :id"), {"id": run_id}
        )
        assert "'sunflower'" in vector.scalar_one()


ENDED_RUNS = 20_000
ACTIVE_RUNS = 20
QUERIES = {
    "run timeout sweep": "select id from runs where status in ('running','waiting','paused')"
    " and deadline_at < now() limit 500",
    "next run deadline": "select min(deadline_at) from runs"
    " where status in ('running','waiting','paused')",
    "retention cutoff": "select finished_at from runs where status in"
    " ('succeeded','failed','cancelled','timed_out') and finished_at is not null"
    " order by finished_at desc offset 10 limit 1",
    "retention batch": "select id from runs where status in"
    " ('succeeded','failed','cancelled','timed_out')"
    " and finished_at < now() - interval '13 days 12 hours' limit 100 for update skip locked",
    "dashboard": "select count(*) from runs where finished_at >= now() - interval '1 hour'",
    "created cutoff": "select created_at from runs order by created_at desc offset 10 limit 1",
    "child runs": "select id from runs where parent_run_id = :id",
    "re-runs": "select id from runs where rerun_of = :id order by created_at",
    "idempotency key": "select id, status from runs where idempotency_key = 'k-5'",
}


@pytest.mark.parametrize("name", sorted(QUERIES))
async def test_run_indexes_serve_their_queries_over_many_ended_runs(
    runtime: Runtime, name: str
) -> None:
    async with runtime.sessionmaker() as session, session.begin():
        workflow_id, version_id = await _version(session, runtime)
        await session.execute(
            text(
                "insert into runs (id, workflow_id, version_id, version_number, status, trigger,"
                " created_at, started_at, finished_at, deadline_at, idempotency_key, rerun_of)"
                " select gen_random_uuid(), :w, :v, 1,"
                "  case when g <= :active then 'running' else 'succeeded' end, 'manual',"
                "  now() - g * interval '1 minute', now() - g * interval '1 minute',"
                "  case when g > :active then now() - g * interval '1 minute' end,"
                "  case when g <= :active then now() + interval '1 hour' end,"
                "  case when g % 1000 = 5 then 'k-' || g end, null"
                " from generate_series(1, :n) g"
            ),
            {"w": workflow_id, "v": version_id, "active": ACTIVE_RUNS, "n": ENDED_RUNS},
        )
        await session.execute(text("analyze runs"))
        plan = await session.execute(
            text("explain (costs off) " + QUERIES[name]), {"id": uuid.uuid4()}
        )
        lines = "\n".join(row[0] for row in plan)
    assert "Seq Scan on runs" not in lines, lines
    assert "Index" in lines, lines


EVENTS = 20_000
# retention's statements on events (backend/services/operations/retention_events.py), the
# values of their parameters, and the index each must read
EVENT_QUERIES = {
    "last due id": (retention_events.LAST_DUE_EVENT, "ix_events_created"),
    "delete batch": (retention_events.DELETE_DUE_EVENTS, "events_pkey"),
    "newest cutoff": (retention_events.NEWEST_EVENT, "events_pkey"),
}
CUTOFF = "now() - interval '5 hours'"
VALUES = {":cutoff": CUTOFF, ":c": CUTOFF, ":last": "2000", ":n": "100", ":o": "10"}


@pytest.mark.parametrize("name", sorted(EVENT_QUERIES))
async def test_event_indexes_serve_retention_over_many_events(runtime: Runtime, name: str) -> None:
    """``ix_events_created`` is a BRIN index (migration 0034_events_created_brin): an
    event writes no entry into it, and retention's queries still read through an index."""
    query, index = EVENT_QUERIES[name]
    for parameter in sorted(VALUES, key=len, reverse=True):
        query = query.replace(parameter, VALUES[parameter])
    async with runtime.sessionmaker() as session, session.begin():
        await session.execute(
            text(
                "insert into events (run_id, kind, data, created_at)"
                " select gen_random_uuid(), 'step.started', '{}',"
                "  now() - (:n - g) * interval '1 second' from generate_series(1, :n) g"
            ),
            {"n": EVENTS},
        )
        await session.execute(text("select brin_summarize_new_values('ix_events_created')"))
        await session.execute(text("analyze events"))
        plan = await session.execute(text("explain (costs off) " + query))
        nodes = [row[0].strip() for row in plan]
    lines = "\n".join(nodes)
    # no sequential scan finds the events by time (the delete's outer join by id may
    # choose one on a table this small, as it did with the B-tree index)
    assert not any(
        "Seq Scan on events" in scan and "created_at" in condition
        for scan, condition in itertools.pairwise(nodes)
    ), lines
    assert f"Index Scan on {index}" in lines or f"using {index}" in lines, lines
