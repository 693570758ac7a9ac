"""The run store: PostgreSQL behind the engine's :class:`~backend.engine.ports.RunStore`.

Every locked transition follows the execution model: a transaction locks the run row
(``SELECT ... FOR UPDATE``), loads a :class:`~backend.engine.model.RunState`, lets the pure
engine change it, then writes the changed rows and the outbox events before commit, with
ONE statement (:func:`~backend.db.run_writes.write_state`). Runs are inserted one way,
:func:`~backend.db.run_writes.insert_run`. Step rows are read with a column select (no ORM
objects). The module-level functions work on a caller's session; :class:`PgRunStore` and
:class:`PgRunTransaction` wrap them for the execution use cases.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, func, literal, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker
from sqlalchemy.orm.attributes import set_committed_value

from backend.db import graphs
from backend.db.models import Attempt, Event, Run, StepRun, Workflow, WorkflowVersion
from backend.db.run_writes import STEP_FIELDS, insert_run, step_values, write_state
from backend.engine.model import ChildRun, RunState, StepRecord
from backend.engine.ports import (
    DuplicateRun,
    FinishedAttempt,
    HeldSteps,
    NewAttempt,
    NewRun,
    RunRow,
    StaleAttempt,
    VersionRow,
    WorkflowSettings,
    Written,
)
from backend.engine.states import RunStatus, StepStatus
from designer_schema.graph import WorkflowGraph

__all__ = [
    "FinishedAttempt",
    "HeldSteps",
    "NewAttempt",
    "PgRunStore",
    "StaleAttempt",
    "Steps",
    "finish_attempt",
    "load_state",
    "lock_run",
    "save_state",
    "step_values",
    "write_state",
]

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
_SELECT_CHILDREN = (
    select(
        _RUNS.c.id,
        _RUNS.c.parent_step_id,
        _RUNS.c.parent_index,
        _RUNS.c.status,
        _RUNS.c.output,
        _RUNS.c.error,
    )
    .where(_RUNS.c.parent_run_id == bindparam("run_id"))
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
    session: AsyncSession,
    run: Run,
    *,
    children: bool = True,
    steps: HeldSteps | None = None,
) -> RunState:
    """Build the engine's view of ``run`` from its step rows.

    ``children=False`` skips the child-run query; only pass it when the run's graph has no
    Sub-workflow or For-each step (then the run has no children). ``steps`` are step
    records the caller holds from its own write of this run (of the run's current
    ``revision``, checked under the run lock): they replace the step query.
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
    if children:
        for cid, step_id, index, status, output, error in await session.execute(
            _SELECT_CHILDREN, {"run_id": run.id}
        ):
            by_step.setdefault(str(step_id), []).append(
                ChildRun(str(step_id), int(index or 0), str(cid), status, output, error)
            )
    return RunState(
        run_id=str(run.id),
        workflow_id=str(run.workflow_id),
        version_number=run.version_number,
        status=RunStatus(run.status),
        input=run.input,
        steps=records,
        output=run.output,
        error=run.error,
        response=run.response,
        started_at=run.started_at,
        finished_at=run.finished_at,
        children=by_step,
    )


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
            "output": output,
            "error": error,
            "finished_at": now,
        },
    )
    return bool(getattr(result, "rowcount", 0))


async def extend_lease(
    session: AsyncSession, attempt_id: int, fencing_token: str, lease_until: datetime
) -> bool:
    """Heartbeat: push the lease of a running attempt; False when it is no longer current."""
    result = await session.execute(
        update(_ATTEMPTS).where(_CURRENT_ATTEMPT).values(lease_expires_at=lease_until),
        {"attempt_id": attempt_id, "token": fencing_token},
    )
    return bool(getattr(result, "rowcount", 0))


def run_row(run: Run) -> RunRow:
    """The :class:`~backend.engine.ports.RunRow` of an ORM run."""
    return RunRow(
        id=run.id,
        workflow_id=run.workflow_id,
        version_id=run.version_id,
        version_number=run.version_number,
        status=run.status,
        trigger=run.trigger,
        input=run.input,
        created_by=run.created_by,
        created_at=run.created_at,
        started_at=run.started_at,
        deadline_at=run.deadline_at,
        parent_run_id=run.parent_run_id,
        revision=run.revision,
    )


async def workflow_settings(session: AsyncSession, workflow_id: uuid.UUID) -> WorkflowSettings:
    """The run-control settings of a workflow (defaults when none or it is gone)."""
    found = (
        await session.execute(select(Workflow.settings).where(Workflow.id == workflow_id))
    ).scalar_one_or_none()
    return WorkflowSettings.from_raw(found)


@contextlib.contextmanager
def _duplicate_key(new: NewRun) -> Iterator[None]:
    """Turn the unique violation of a taken idempotency key into :class:`DuplicateRun`."""
    try:
        yield
    except IntegrityError as exc:
        if new.idempotency_key is None:
            raise
        raise DuplicateRun(new.idempotency_key) from exc


class PgRunTransaction:
    """One transaction of a run transition (:class:`~backend.engine.ports.RunTransaction`).

    Keeps the ORM rows it locked so :meth:`save` updates them in memory."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self._rows: dict[uuid.UUID, Run] = {}

    async def lock_admission(self, workflow_id: uuid.UUID) -> None:
        await self.session.execute(
            _ADMISSION_LOCK, {"cls": ADMISSION_LOCK_CLASS, "workflow_id": str(workflow_id)}
        )

    async def peek(self, run_id: uuid.UUID) -> tuple[str, uuid.UUID] | None:
        found = (
            await self.session.execute(select(Run.status, Run.workflow_id).where(Run.id == run_id))
        ).one_or_none()
        return None if found is None else (str(found[0]), found[1])

    async def lock(self, run_id: uuid.UUID) -> RunRow | None:
        run = await lock_run(self.session, run_id)
        if run is None:
            return None
        self._rows[run.id] = run
        return run_row(run)

    async def load(
        self, row: RunRow, *, children: bool = True, held: HeldSteps | None = None
    ) -> RunState:
        return await load_state(self.session, self._rows[row.id], children=children, steps=held)

    async def graph(self, version_id: uuid.UUID) -> WorkflowGraph:
        return await graphs.graph_for_version(self.session, version_id)

    async def settings(self, workflow_id: uuid.UUID) -> WorkflowSettings:
        return await workflow_settings(self.session, workflow_id)

    async def insert_run(self, new: NewRun, state: RunState | None = None) -> bool:
        if self.session.new or self.session.dirty:
            await self.session.flush()
        with _duplicate_key(new):
            return (await insert_run(self.session, new, state)).written

    async def save(
        self,
        row: RunRow,
        state: RunState,
        *,
        finish: FinishedAttempt | None = None,
        start: NewAttempt | None = None,
        deadline_at: datetime | None = None,
    ) -> RunRow:
        run = self._rows[row.id]
        await save_state(
            self.session, run, state, finish=finish, start=start, deadline_at=deadline_at
        )
        return run_row(run)

    async def close_attempt(self, finish: FinishedAttempt, status: str | None = None) -> bool:
        return await finish_attempt(
            self.session,
            finish.id,
            finish.fencing_token,
            status=status or finish.status,
            output=finish.output,
            error=finish.error,
            now=finish.finished_at,
        )

    async def cancel_running_attempts(self, run_id: uuid.UUID, now: datetime) -> None:
        await self.session.execute(
            update(Attempt)
            .where(Attempt.run_id == run_id, Attempt.status == "running")
            .values(status="cancelled", finished_at=now)
        )

    async def active_count(self, workflow_id: uuid.UUID) -> int:
        found = await self.session.execute(
            select(func.count())
            .select_from(Run)
            .where(Run.workflow_id == workflow_id, Run.status.in_(ACTIVE_RUN_STATUSES))
        )
        return int(found.scalar_one())

    async def oldest_queued(self, workflow_id: uuid.UUID, limit: int) -> list[uuid.UUID]:
        found = await self.session.execute(
            select(Run.id)
            .where(Run.workflow_id == workflow_id, Run.status == RunStatus.QUEUED.value)
            .order_by(Run.created_at, Run.id)
            .limit(limit)
        )
        return list(found.scalars().all())

    async def resolve_version(
        self, workflow_id: str, number: int | None
    ) -> tuple[uuid.UUID, uuid.UUID, int] | None:
        try:
            wf_id = uuid.UUID(workflow_id)
        except ValueError:
            return None
        query = select(WorkflowVersion.workflow_id, WorkflowVersion.id, WorkflowVersion.number)
        if number is None:
            query = query.join(
                Workflow,
                (WorkflowVersion.workflow_id == Workflow.id)
                & (WorkflowVersion.number == Workflow.active_version),
            )
        else:
            query = query.where(WorkflowVersion.number == number)
        found = (
            await self.session.execute(query.where(WorkflowVersion.workflow_id == wf_id))
        ).one_or_none()
        return None if found is None else (found[0], found[1], int(found[2]))

    async def workflow_name(self, workflow_id: uuid.UUID) -> str | None:
        found = await self.session.execute(select(Workflow.name).where(Workflow.id == workflow_id))
        return found.scalar_one_or_none()

    async def step_outcomes(self, run_id: uuid.UUID) -> dict[str, str]:
        found = await self.session.execute(
            select(StepRun.step_id, StepRun.status).where(StepRun.run_id == run_id)
        )
        return {str(step_id): str(status) for step_id, status in found}

    async def copy_steps(
        self, source_run_id: uuid.UUID, target_run_id: uuid.UUID, step_ids: list[str]
    ) -> None:
        """One ``INSERT ... SELECT`` of every field a write stores."""
        if not step_ids:
            return
        source = select(
            literal(target_run_id, type_=_STEP_RUNS.c.run_id.type),
            _STEP_RUNS.c.step_id,
            *(_STEP_RUNS.c[name] for name in STEP_FIELDS),
        ).where(_STEP_RUNS.c.run_id == source_run_id, _STEP_RUNS.c.step_id.in_(step_ids))
        await self.session.execute(
            insert(_STEP_RUNS).from_select(["run_id", "step_id", *STEP_FIELDS], source)
        )

    async def add_event(self, run_id: uuid.UUID, kind: str, data: dict[str, Any]) -> None:
        self.session.add(Event(run_id=run_id, kind=kind, data=data))
        await self.session.flush()


class PgRunStore:
    """PostgreSQL implementation of :class:`~backend.engine.ports.RunStore`."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self.sessionmaker = sessionmaker

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[PgRunTransaction]:
        async with self.sessionmaker() as session, session.begin():
            yield PgRunTransaction(session)

    @contextlib.asynccontextmanager
    async def _autocommit(self) -> AsyncIterator[AsyncConnection]:
        """A pooled connection whose statements each commit on their own: a single
        statement is then its own transaction (no BEGIN/COMMIT round trips)."""
        engine = self.sessionmaker.kw["bind"]
        async with engine.connect() as conn:
            yield await conn.execution_options(isolation_level="AUTOCOMMIT")

    async def graph(self, version_id: uuid.UUID) -> WorkflowGraph:
        graph = graphs.cached_graph(version_id)
        if graph is None:
            async with self.sessionmaker() as session:
                graph = await graphs.graph_for_version(session, version_id)
        return graph

    def cached_graph(self, version_id: uuid.UUID) -> WorkflowGraph | None:
        return graphs.cached_graph(version_id)

    async def insert_started(
        self, new: NewRun, state: RunState, settings: WorkflowSettings
    ) -> WorkflowSettings | None:
        async with self._autocommit() as conn:
            with _duplicate_key(new):
                inserted = await insert_run(conn, new, state, expected_settings=settings.raw)
        if inserted.written:
            return None
        if inserted.settings_differ:
            return WorkflowSettings.from_raw(inserted.settings)
        raise LookupError(f"workflow {new.workflow_id} not found")

    async def write_unlocked(
        self,
        run_id: uuid.UUID,
        state: RunState,
        *,
        finish: FinishedAttempt | None,
        start: NewAttempt | None,
        expected_revision: int,
    ) -> Written:
        async with self._autocommit() as conn:
            return await write_state(
                conn, run_id, state, finish=finish, start=start, expected_revision=expected_revision
            )

    async def extend_lease(self, attempt_id: int, token: str, until: datetime) -> bool:
        async with self.sessionmaker() as session, session.begin():
            return await extend_lease(session, attempt_id, token, until)

    async def run_by_idempotency_key(self, key: str) -> tuple[uuid.UUID, str]:
        async with self.sessionmaker() as session:
            found = (
                await session.execute(select(Run.id, Run.status).where(Run.idempotency_key == key))
            ).one()
        return found[0], str(found[1])

    async def rerun_source(
        self, run_id: uuid.UUID, *, latest: bool
    ) -> tuple[str, Any, VersionRow | None] | None:
        async with self.sessionmaker() as session:
            run = await session.get(Run, run_id)
            if run is None:
                return None
            query = select(WorkflowVersion.id, WorkflowVersion.workflow_id, WorkflowVersion.number)
            if latest:
                query = query.join(
                    Workflow,
                    (WorkflowVersion.workflow_id == Workflow.id)
                    & (WorkflowVersion.number == Workflow.active_version),
                ).where(Workflow.id == run.workflow_id)
            else:
                query = query.where(WorkflowVersion.id == run.version_id)
            found = (await session.execute(query)).one_or_none()
        version = None if found is None else VersionRow(found[0], found[1], int(found[2]))
        return run.status, run.input, version


async def active_version_of(
    session: AsyncSession, workflow_id: uuid.UUID
) -> WorkflowVersion | None:
    """The active version of a workflow (``None``: never published, or no such workflow)."""
    return (
        await session.execute(
            select(WorkflowVersion)
            .join(
                Workflow,
                (WorkflowVersion.workflow_id == Workflow.id)
                & (WorkflowVersion.number == Workflow.active_version),
            )
            .where(Workflow.id == workflow_id)
        )
    ).scalar_one_or_none()
