"""Run rows in a caller's session: lock, load, save (the run store's building blocks).

Every locked transition follows the execution model: a transaction locks the run row
(``SELECT ... FOR UPDATE``), loads a :class:`~backend.engine.model.RunState`, lets the pure
engine change it, then writes the changed rows and the outbox events before commit, with
ONE statement (:func:`~backend.db.run_writes.write_state`). Runs are inserted one way,
:func:`~backend.db.run_inserts.insert_run`. Step rows are read with a column select (no ORM
objects). backend/db/run_store.py (``PgRunStore``) and backend/db/run_transaction.py
(``PgRunTransaction``) wrap these for the execution use cases.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import set_committed_value

from backend.db import payloads
from backend.db.fast_path import FastPath
from backend.db.models import Attempt, Run, StepRun, Workflow, WorkflowVersion
from backend.db.run_writes import STEP_FIELDS, Positional, write_state
from backend.db.unread_input import UnreadInput, started_input
from backend.engine.model import ChildRun, ChildSummary, RunState, StepRecord
from backend.engine.ports import (
    FinishedAttempt,
    HeldSteps,
    NewAttempt,
    OutputsWanted,
    RunRow,
    StaleAttempt,
    WorkflowSettings,
)
from backend.engine.states import RunStatus, StepStatus

Steps = HeldSteps
"""Step records a process holds from its own write (see :class:`HeldSteps`)."""

ACTIVE_RUN_STATUSES = (RunStatus.RUNNING.value, RunStatus.WAITING.value, RunStatus.PAUSED.value)
"""Statuses that hold a slot of a workflow's ``max_concurrent_runs``."""

ADMISSION_LOCK_CLASS = 0x52594144
"""First key of the per-workflow admission advisory lock (``pg_advisory_xact_lock(int,
int)``; the two-key space never meets the scheduler's one-key leader lock)."""

_LOCK_RUN = select(Run).where(Run.id == bindparam("run_id")).with_for_update()
_ADMISSION_LOCK = text(
    "SELECT pg_advisory_xact_lock(CAST(:cls AS int), hashtext(CAST(:workflow_id AS text)))"
)

# Core tables (not ORM entities): hot statements skip the ORM's compile and bulk paths.
_RUNS = cast(Table, Run.__table__)
_STEP_RUNS = cast(Table, StepRun.__table__)
_ATTEMPTS = cast(Table, Attempt.__table__)
_SELECT_STEPS = select(*(_STEP_RUNS.c[name] for name in ("step_id", *STEP_FIELDS))).where(
    _STEP_RUNS.c.run_id == bindparam("run_id")
)
# One row per calling step: its children that did not succeed, in arrays (decoded by
# asyncpg in C), and the next index. Each part is read from an index of migration
# 0030_children_pass: the calling steps by a skip scan of ix_runs_parent_run_id, each
# one's highest index by one descent of it, the unsucceeded children from
# ix_runs_parent_open. A pass of a parent with 10,000 children reads the few running or
# failed ones, never the 10,000 rows (the cost no longer grows with the list).
_SELECT_CHILDREN = text(
    """
    WITH RECURSIVE steps(step_id) AS (
        SELECT min(parent_step_id) FROM runs WHERE parent_run_id = :run_id
        UNION ALL
        SELECT (SELECT min(parent_step_id) FROM runs
                WHERE parent_run_id = :run_id AND parent_step_id > s.step_id)
        FROM steps s WHERE s.step_id IS NOT NULL
    )
    SELECT s.step_id,
           (SELECT max(parent_index) + 1 FROM runs
            WHERE parent_run_id = :run_id AND parent_step_id = s.step_id),
           o.indexes, o.ids, o.statuses, o.errors
    FROM steps s CROSS JOIN LATERAL (
        SELECT array_agg(parent_index ORDER BY parent_index) AS indexes,
               array_agg(id::text ORDER BY parent_index) AS ids,
               array_agg(status ORDER BY parent_index) AS statuses,
               jsonb_object_agg(parent_index::text, error)
                   FILTER (WHERE error IS NOT NULL) AS errors
        FROM runs
        WHERE parent_run_id = :run_id AND parent_step_id = s.step_id
          AND status <> 'succeeded'
    ) o
    WHERE s.step_id IS NOT NULL
    """
)
_SELECT_ALL_CHILDREN = (
    select(
        _RUNS.c.id,
        _RUNS.c.parent_step_id,
        _RUNS.c.parent_index,
        _RUNS.c.status,
        _RUNS.c.output,
        _RUNS.c.error,
    )
    .where(
        (_RUNS.c.parent_run_id == bindparam("run_id"))
        & _RUNS.c.parent_step_id.in_(bindparam("step_ids", expanding=True))
    )
    .order_by(_RUNS.c.parent_index)
)
_CURRENT_ATTEMPT = (
    (_ATTEMPTS.c.id == bindparam("attempt_id"))
    & (_ATTEMPTS.c.fencing_token == bindparam("token"))
    & (_ATTEMPTS.c.status == "running")
)
_FINISH_ATTEMPT = (
    update(_ATTEMPTS)
    .where(_CURRENT_ATTEMPT)
    .values(
        status=bindparam("status"),
        output=bindparam("output", type_=_ATTEMPTS.c.output.type),
        error=bindparam("error", type_=_ATTEMPTS.c.error.type),
        finished_at=bindparam("finished_at"),
    )
)
_RUN_FIELDS = ("status", "output", "error", "response", "started_at", "finished_at")


async def lock_run(session: AsyncSession, run_id: uuid.UUID) -> Run | None:
    """Return the run row locked ``FOR UPDATE`` (``None`` when it does not exist)."""
    result = await session.execute(_LOCK_RUN, {"run_id": run_id})
    return result.scalar_one_or_none()


async def load_state(
    session: payloads.Db,
    run: Run,
    *,
    children: bool = True,
    steps: HeldSteps | None = None,
    outputs: OutputsWanted | None = None,
    unread: UnreadInput | None = None,
) -> RunState:
    """Build the engine's view of ``run`` from its step rows.

    ``children=False`` skips the child-run query; only pass it when the run's graph has no
    Sub-workflow or For-each step (then the run has no children). ``steps`` are step
    records the caller holds from its own write of this run (of the run's current
    ``revision``, checked under the run lock): they replace the step query. Child runs
    are read in short: per calling step the children that did not succeed and the count
    of the others (``RunState.child_summaries``); every child, with its output, is read
    for the steps ``outputs`` names (for every step without it). Values stored by
    reference (backend/db/payloads.py) are read back in full, but for the parts of the
    run input ``unread`` leaves unread (backend/db/unread_input.py).
    """
    records: dict[str, StepRecord]
    if steps is not None and steps.revision == run.revision:
        records = steps.records
    else:
        records = {}
        for row in await session.execute(_SELECT_STEPS, {"run_id": run.id}):
            fields = row._asdict()  # columns are StepRecord's fields
            fields["status"] = StepStatus(fields["status"])
            fields["ports"] = tuple(fields["ports"] or ())
            records[row.step_id] = StepRecord(**fields)
    by_step: dict[str, list[ChildRun]] = {}
    summaries: dict[str, ChildSummary] = {}
    if children:
        rows = await session.execute(_SELECT_CHILDREN, {"run_id": run.id})
        for step_id, next_index, indexes, ids, statuses, errors in rows:
            sid, errors = str(step_id), errors or {}
            by_step[sid] = [
                ChildRun(sid, int(i or 0), cid, status, None, errors.get(str(i)))
                for i, cid, status in zip(indexes or (), ids or (), statuses or (), strict=True)
            ]
            # every index below next_index has its row (ChildSummary): the unlisted ones
            # are the succeeded ones, counted without reading them
            summaries[sid] = ChildSummary.below(int(next_index or 0), len(by_step[sid]))
        wanted = set(summaries) if outputs is None else outputs(records, by_step, summaries)
        if wanted:
            await _all_children(session, run.id, by_step, summaries, wanted)
    # held records come from this process's memory: full values, nothing to resolve
    held = steps is not None and steps.revision == run.revision
    state = await build_state(session, run, records, by_step, resolve_steps=not held, unread=unread)
    if held and steps is not None:  # their values read by reference are still known
        state.stored = {**steps.stored, **state.stored}
    state.child_summaries = summaries
    return state


async def _all_children(
    session: payloads.Db,
    run_id: uuid.UUID,
    by_step: dict[str, list[ChildRun]],
    summaries: dict[str, ChildSummary],
    step_ids: set[str],
) -> None:
    """Every child of ``step_ids``, with its output, in place of their short lists."""
    for step_id in step_ids:
        by_step[step_id] = []
        summaries.pop(step_id, None)
    for cid, step_id, index, status, output, error in await session.execute(
        _SELECT_ALL_CHILDREN, {"run_id": run_id, "step_ids": sorted(step_ids)}
    ):
        by_step[str(step_id)].append(
            ChildRun(str(step_id), int(index or 0), str(cid), status, output, error)
        )


async def build_state(
    session: payloads.Db,
    run: Run,
    records: dict[str, StepRecord],
    by_step: dict[str, list[ChildRun]],
    *,
    resolve_steps: bool,
    unread: UnreadInput | None = None,
) -> RunState:
    """The engine's view of ``run`` from its step ``records`` and child runs
    ``by_step``: values stored by reference (backend/db/payloads.py) are read back in
    full (in the step records too with ``resolve_steps``; without it they are records
    held in memory, already full), but for the parts of the run input ``unread`` names
    (kept as references where the graph cannot see them: backend/db/unread_input.py) and
    the run input's references once the run has started (``started_input``)."""
    loaded = records if resolve_steps else {}
    stored: payloads.Known = {}
    stored_input = run.input
    if unread is not None:
        stored_input = unread.value(run.input)
        unread.records(loaded)
    if run.status != RunStatus.QUEUED.value:
        stored_input = started_input(stored_input)
    run_input, run_output, run_error = await _resolve(
        session, run, stored_input, loaded, by_step, stored
    )
    return RunState(
        run_id=str(run.id),
        workflow_id=str(run.workflow_id),
        version_number=run.version_number,
        status=RunStatus(run.status),
        input=run_input,
        steps=records,
        output=run_output,
        error=run_error,
        response=run.response,
        started_at=run.started_at,
        finished_at=run.finished_at,
        children=by_step,
        stored=stored,
    )


async def _resolve(
    session: payloads.Db,
    run: Run,
    run_input: Any,
    records: dict[str, StepRecord],
    children: dict[str, list[ChildRun]],
    stored: payloads.Known,
) -> list[Any]:
    """Put the full values back where the run's rows hold references to large values
    (backend/db/payloads.py): step records and children in place; returns the run's
    input, output and error."""
    values: list[Any] = [run_input, run.output, run.error]
    for rec in records.values():
        values += [rec.input, rec.output, rec.error, rec.data]
    for entries in children.values():
        values += [v for c in entries for v in (c.output, c.error)]
    resolved = iter(await payloads.resolve_values(session, values, stored))
    run_values = [next(resolved) for _ in range(3)]
    for rec in records.values():
        rec.input, rec.output, rec.error, rec.data = (next(resolved) for _ in range(4))
    for entries in children.values():
        for c in entries:
            c.output, c.error = next(resolved), next(resolved)
    return run_values


async def save_state(
    session: AsyncSession,
    run: Run,
    state: RunState,
    *,
    finish: FinishedAttempt | None = None,
    start: NewAttempt | None = None,
    deadline_at: datetime | None = None,
) -> None:
    """:func:`~backend.db.run_writes.write_state` under the run lock the caller holds
    (``run`` locked by :func:`lock_run` in ``session``'s transaction).

    Raises :class:`StaleAttempt` when ``finish``'s fencing token no longer holds (nothing
    was written; the caller's transaction then rolls back whatever else it did). ``run``
    is updated in memory (fields and revision) without becoming dirty. Pending ORM changes
    of the session are flushed first. Nothing is written when nothing changed.
    """
    new = {name: getattr(state, name) for name in _RUN_FIELDS}
    new["status"] = state.status.value
    if deadline_at is not None:
        new["deadline_at"] = deadline_at
    changed = {name: value for name, value in new.items() if getattr(run, name) != value}
    if not (state.changed or changed or state.events or finish or start):
        return
    if session.new or session.dirty:
        await session.flush()
    written = await write_state(
        session, run.id, state, finish=finish, start=start, deadline_at=deadline_at
    )
    if written.revision is None:
        raise StaleAttempt(f"attempt {finish.id if finish else '?'} is no longer current")
    for name, value in changed.items():
        set_committed_value(run, name, value)
    set_committed_value(run, "revision", written.revision)


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
    result = await session.execute(
        _FINISH_ATTEMPT,
        {
            "attempt_id": attempt_id,
            "token": fencing_token,
            "status": status,
            "output": await payloads.store_value(session, output),
            "error": await payloads.store_value(session, error),
            "finished_at": now,
        },
    )
    return bool(getattr(result, "rowcount", 0))


async def extend_lease(
    db: AsyncSession | FastPath, attempt_id: int, fencing_token: str, lease_until: datetime
) -> bool:
    """Heartbeat: push the lease of a running attempt to ``lease_until``, in ``db``'s
    transaction or on the fast path (its own transaction); False when the attempt is no
    longer current (finished, or its fencing token was superseded)."""
    params = {"attempt_id": attempt_id, "token": fencing_token, "until": lease_until}
    return await _EXTEND_LEASE.fetchrow(db, params) is not None


_EXTEND_LEASE = Positional(
    update(_ATTEMPTS)
    .where(_CURRENT_ATTEMPT)
    .values(lease_expires_at=bindparam("until"))
    .returning(_ATTEMPTS.c.id)
)


def run_row(run: Run) -> RunRow:
    """The :class:`~backend.engine.ports.RunRow` of an ORM run. Its ``input`` is the
    column's, its references kept as :class:`~backend.db.payloads.Unresolved` (the same
    reference wherever it is written again, such as the error workflow's input: read back
    in full there, never stored as data)."""
    return RunRow(
        id=run.id,
        workflow_id=run.workflow_id,
        version_id=run.version_id,
        version_number=run.version_number,
        status=run.status,
        trigger=run.trigger,
        input=started_input(run.input),
        created_by=run.created_by,
        created_at=run.created_at,
        started_at=run.started_at,
        deadline_at=run.deadline_at,
        parent_run_id=run.parent_run_id,
        revision=run.revision,
    )


_SELECT_SETTINGS = select(cast(Table, Workflow.__table__).c.settings).where(
    cast(Table, Workflow.__table__).c.id == bindparam("workflow_id")
)


async def workflow_settings(session: payloads.Db, workflow_id: uuid.UUID) -> WorkflowSettings:
    """The run-control settings of a workflow (defaults when none or it is gone)."""
    found = (
        await session.execute(_SELECT_SETTINGS, {"workflow_id": workflow_id})
    ).scalar_one_or_none()
    return WorkflowSettings.from_raw(found)


async def active_version_of(
    session: AsyncSession, workflow_id: uuid.UUID
) -> WorkflowVersion | None:
    """The active version of a workflow (``None``: never published, archived, or no such
    workflow)."""
    return (
        await session.execute(
            select(WorkflowVersion)
            .join(
                Workflow,
                (WorkflowVersion.workflow_id == Workflow.id)
                & (WorkflowVersion.number == Workflow.active_version),
            )
            .where(Workflow.id == workflow_id, Workflow.archived_at.is_(None))
        )
    ).scalar_one_or_none()
