"""Persistence of runs, step runs, attempts and events (implements the engine's state I/O).

Every write path here follows the execution model: a transaction locks the run row
(``SELECT ... FOR UPDATE``), loads a :class:`~backend.engine.model.RunState`, lets the pure
engine change it, then writes the changed rows and the outbox events before commit.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import msgspec
from sqlalchemy import select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from backend.db.models import Attempt, Event, Run, StepRun, Workflow, WorkflowVersion
from backend.engine.model import ChildRequest, ChildRun, RunState, StepRecord
from backend.engine.states import RunStatus, StepStatus


async def lock_run(session: AsyncSession, run_id: uuid.UUID) -> Run | None:
    """Return the run row locked ``FOR UPDATE`` (``None`` when it does not exist)."""
    result = await session.execute(select(Run).where(Run.id == run_id).with_for_update())
    return result.scalar_one_or_none()


async def load_state(session: AsyncSession, run: Run) -> RunState:
    """Build the engine's view of ``run`` from its step rows."""
    rows = (await session.execute(select(StepRun).where(StepRun.run_id == run.id))).scalars()
    steps = {
        r.step_id: StepRecord(
            step_id=r.step_id,
            status=StepStatus(r.status),
            ports=tuple(r.ports or ()),
            input=r.input,
            output=r.output,
            error=r.error,
            attempts=r.attempts,
            not_before=r.not_before,
            started_at=r.started_at,
            finished_at=r.finished_at,
            data=r.data,
        )
        for r in rows
    }
    children: dict[str, list[ChildRun]] = {}
    child_rows = await session.execute(
        select(Run.id, Run.parent_step_id, Run.parent_index, Run.status, Run.output, Run.error)
        .where(Run.parent_run_id == run.id)
        .order_by(Run.parent_index)
    )
    for cid, step_id, index, status, output, error in child_rows:
        children.setdefault(str(step_id), []).append(
            ChildRun(str(step_id), int(index or 0), str(cid), status, output, error)
        )
    return RunState(
        run_id=str(run.id),
        workflow_id=str(run.workflow_id),
        version_number=run.version_number,
        status=RunStatus(run.status),
        input=run.input,
        steps=steps,
        output=run.output,
        error=run.error,
        response=run.response,
        started_at=run.started_at,
        finished_at=run.finished_at,
        children=children,
    )


async def create_child(session: AsyncSession, parent: Run, request: ChildRequest) -> ChildRun:
    """Insert the queued child run ``request`` asks for (a no-op when it exists).

    The version is the pinned number or the workflow's active one. When the workflow or
    version does not exist, no run is inserted and the returned record is ``failed`` with
    kind ``subworkflow_not_found``; the caller hands it to the engine like any child.
    """
    entry = ChildRun(request.step_id, request.index, request.run_id)
    try:
        workflow_id = uuid.UUID(request.workflow_id)
    except ValueError:
        workflow_id = None
    version = None
    if workflow_id is not None:
        workflow = await session.get(Workflow, workflow_id)
        number = request.version
        if workflow is not None and number is None:
            number = workflow.active_version
        if workflow is not None and number is not None:
            version = (
                await session.execute(
                    select(WorkflowVersion).where(
                        WorkflowVersion.workflow_id == workflow_id,
                        WorkflowVersion.number == number,
                    )
                )
            ).scalar_one_or_none()
    if version is None:
        which = "active version" if request.version is None else f"version {request.version}"
        entry.status = RunStatus.FAILED.value
        entry.error = {
            "message": f"workflow {request.workflow_id} has no {which}",
            "kind": "subworkflow_not_found",
        }
        return entry
    await session.execute(
        insert(Run)
        .values(
            id=uuid.UUID(request.run_id),
            workflow_id=version.workflow_id,
            version_id=version.id,
            version_number=version.number,
            status=RunStatus.QUEUED.value,
            trigger="subworkflow",
            input=request.input,
            created_by=parent.created_by,
            parent_run_id=parent.id,
            parent_step_id=request.step_id,
            parent_index=request.index,
        )
        .on_conflict_do_nothing(index_elements=["id"])
    )
    return entry


def step_values(rec: StepRecord) -> dict[str, Any]:
    """The ``step_runs`` column values of a step record."""
    return {
        "status": rec.status.value,
        "ports": list(rec.ports),
        "input": rec.input,
        "output": rec.output,
        "error": rec.error,
        "attempts": rec.attempts,
        "not_before": rec.not_before,
        "started_at": rec.started_at,
        "finished_at": rec.finished_at,
        "data": rec.data,
    }


async def save_state(session: AsyncSession, run: Run, state: RunState) -> None:
    """Write the changed step rows, the run row and the events of ``state``."""
    for step_id in sorted(state.changed):
        values = step_values(state.steps[step_id])
        stmt = insert(StepRun).values(run_id=run.id, step_id=step_id, **values)
        stmt = stmt.on_conflict_do_update(index_elements=["run_id", "step_id"], set_=values)
        await session.execute(stmt)
    run.status = state.status.value
    run.output = state.output
    run.error = state.error
    run.response = state.response
    run.started_at = state.started_at
    run.finished_at = state.finished_at
    for ev in state.events:
        session.add(Event(run_id=run.id, kind=ev.kind, step_id=ev.step_id, data=ev.data))
    state.changed.clear()
    state.events.clear()
    await session.flush()


async def claim_attempt(
    session: AsyncSession,
    run: Run,
    state: RunState,
    step_id: str,
    *,
    worker: str,
    input: Any,
    config: Any,
    now: datetime,
    lease_until: datetime,
) -> Attempt:
    """Start a new attempt of ready step ``step_id`` (caller holds the run lock).

    The fencing token is random per attempt; completion must present it.
    """
    rec = state.steps[step_id]
    rec.move(StepStatus.RUNNING)
    rec.attempts += 1
    rec.not_before = None
    if rec.started_at is None:
        rec.started_at = now
    state.touch(step_id)
    state.emit("step.started", step_id, attempt=rec.attempts, worker=worker)
    attempt = Attempt(
        run_id=run.id,
        step_id=step_id,
        number=rec.attempts,
        fencing_token=uuid.uuid4().hex,
        status="running",
        worker=worker,
        idempotency_key=f"{run.id}:{step_id}",
        input=input,
        config=config,
        lease_expires_at=lease_until,
        started_at=now,
    )
    session.add(attempt)
    await save_state(session, run, state)
    return attempt


async def finish_attempt(
    session: AsyncSession,
    attempt_id: int,
    fencing_token: str,
    *,
    status: str,
    output: Any,
    error: Any,
    now: datetime,
) -> bool:
    """Close attempt ``attempt_id`` if it is still running with ``fencing_token``.

    Returns False for a late or duplicate completion (the attempt was expired, cancelled or
    already finished): the caller must then discard its result.
    """
    return await _update_current_attempt(
        session,
        attempt_id,
        fencing_token,
        status=status,
        output=output,
        error=error,
        finished_at=now,
    )


async def extend_lease(
    session: AsyncSession, attempt_id: int, fencing_token: str, lease_until: datetime
) -> bool:
    """Heartbeat: push the lease of a running attempt; False when it is no longer current."""
    return await _update_current_attempt(
        session, attempt_id, fencing_token, lease_expires_at=lease_until
    )


async def _update_current_attempt(
    session: AsyncSession, attempt_id: int, fencing_token: str, **values: Any
) -> bool:
    """Conditional update of a running attempt holding ``fencing_token``; True if it matched."""
    result = await session.execute(
        update(Attempt)
        .where(
            Attempt.id == attempt_id,
            Attempt.fencing_token == fencing_token,
            Attempt.status == "running",
        )
        .values(**values)
    )
    return bool(getattr(result, "rowcount", 0))


_INSERT_NEW_RUN = text(
    """
    WITH wf AS (
        SELECT settings FROM workflows
        WHERE id = CAST(:workflow_id AS uuid)
          AND coalesce((settings->>'max_concurrent_runs')::numeric, 0) = 0
    ), new_run AS (
        INSERT INTO runs (id, workflow_id, version_id, version_number, status, trigger,
                          idempotency_key, input, output, error, response, created_by,
                          created_at, started_at, finished_at, deadline_at, rerun_of)
        SELECT CAST(:id AS uuid), CAST(:workflow_id AS uuid), CAST(:version_id AS uuid),
               CAST(:version_number AS int), CAST(:status AS text), CAST(:trigger AS text),
               CAST(:idempotency_key AS text), CAST(:input AS jsonb), CAST(:output AS jsonb),
               CAST(:error AS jsonb), CAST(:response AS jsonb), CAST(:created_by AS uuid),
               CAST(:created_at AS timestamptz), CAST(:started_at AS timestamptz),
               CAST(:finished_at AS timestamptz),
               CAST(:created_at AS timestamptz)
                   + (wf.settings->>'run_timeout_seconds')::float8 * interval '1 second',
               CAST(:rerun_of AS uuid)
        FROM wf
        RETURNING id
    ), new_steps AS (
        INSERT INTO step_runs (run_id, step_id, status, ports, input, output, error, attempts,
                               not_before, started_at, finished_at, data)
        SELECT new_run.id, s.step_id, s.status, s.ports, s.input, s.output, s.error,
               s.attempts, s.not_before, s.started_at, s.finished_at, s.data
        FROM new_run, jsonb_to_recordset(CAST(:steps AS jsonb)) AS s(
            step_id text, status text, ports jsonb, input jsonb, output jsonb, error jsonb,
            attempts int, not_before timestamptz, started_at timestamptz,
            finished_at timestamptz, data jsonb)
    ), new_events AS (
        INSERT INTO events (run_id, kind, step_id, data, created_at)
        SELECT new_run.id, e.kind, e.step_id, e.data, CAST(:created_at AS timestamptz)
        FROM new_run, jsonb_to_recordset(CAST(:events AS jsonb))
            AS e(kind text, step_id text, data jsonb, ord int)
        ORDER BY e.ord
    )
    SELECT id FROM new_run
    """
).columns()


def _json(value: Any) -> str | None:
    """JSON text for a ``CAST(... AS jsonb)`` parameter; ``None`` stays SQL NULL."""
    return None if value is None else msgspec.json.encode(value).decode()


async def insert_new_run(
    session: AsyncSession | AsyncConnection, row: dict[str, Any], state: RunState
) -> bool:
    """Insert a started run, its changed step records and its events in ONE statement,
    unless its workflow has a concurrency limit (``max_concurrent_runs``).

    ``row`` holds the run columns that are not in ``state`` (id, workflow_id, version_id,
    version_number, trigger, idempotency_key, created_by, created_at, rerun_of);
    ``created_at`` is also the start instant. The statement reads the workflow's settings
    itself: the run timeout's due time ``deadline_at`` is ``created_at`` plus
    ``run_timeout_seconds`` (none without it), and with a ``max_concurrent_runs`` nothing
    is written and the result is False (the caller then queues the run through admission,
    which locks the workflow row). True when the run was written. Raises
    ``IntegrityError`` when the idempotency key is taken. Used by the start path, where the
    state was computed in memory (a new run has no step rows to load or lock).
    """
    steps = [
        {"step_id": step_id, **step_values(state.steps[step_id])}
        for step_id in sorted(state.changed)
    ]
    events = [
        {"kind": ev.kind, "step_id": ev.step_id, "data": ev.data, "ord": i}
        for i, ev in enumerate(state.events)
    ]
    written = (
        await session.execute(
            _INSERT_NEW_RUN,
            {
                **row,
                "status": state.status.value,
                "input": _json(state.input),
                "output": _json(state.output),
                "error": _json(state.error),
                "response": _json(state.response),
                "started_at": state.started_at,
                "finished_at": state.finished_at,
                "steps": _json(steps),
                "events": _json(events),
            },
        )
    ).first()
    if written is None:
        return False
    state.changed.clear()
    state.events.clear()
    return True
