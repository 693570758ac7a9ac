"""The transaction adapter of the run store
(:class:`~backend.engine.ports.RunTransaction` over an SQLAlchemy session)."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Select, Table, func, literal, select, update
from sqlalchemy.dialects.postgresql import Insert, insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db import graphs
from backend.db.models import (
    Attempt,
    AuditLog,
    Event,
    Run,
    StepRun,
    Workflow,
    WorkflowVersion,
)
from backend.db.run_inserts import insert_queued_runs, insert_run
from backend.db.run_state import (
    _ADMISSION_LOCK,
    _STEP_RUNS,
    ACTIVE_RUN_STATUSES,
    ADMISSION_LOCK_CLASS,
    finish_attempt,
    load_state,
    lock_run,
    run_row,
    save_state,
    workflow_settings,
)
from backend.db.run_writes import STEP_FIELDS
from backend.db.unread_input import unread_input
from backend.db.versions import PUBLISHED
from backend.engine.model import RunState
from backend.engine.ports import (
    AuditEntry,
    DuplicateRun,
    FinishedAttempt,
    HeldSteps,
    NewAttempt,
    NewRun,
    OutputsWanted,
    RunRow,
    WorkflowSettings,
)
from backend.engine.states import RunStatus
from designer_schema.graph import WorkflowGraph

PublisherRefusal = Callable[[AsyncSession, uuid.UUID, str], Awaitable[str | None]]
"""``refusal(session, run id, workflow id)``: why the publisher of the run's version may
not run that workflow (``None``: it may), read in the run's transaction; the services
layer's grant rule (backend/services/identity/references.py), handed to the store by the
composition root (backend/runtime.py)."""
_RUNS = cast(Table, Run.__table__)
_EVENTS = cast(Table, Event.__table__)


@contextlib.contextmanager
def duplicate_key(new: NewRun) -> Iterator[None]:
    """Turn the unique violation of a taken idempotency key into :class:`DuplicateRun`."""
    try:
        yield
    except IntegrityError as exc:
        if new.idempotency_key is None:
            raise
        raise DuplicateRun(new.idempotency_key) from exc


class PgRunTransaction:
    """One transaction of a run transition (:class:`~backend.engine.ports.RunTransaction`).

    Keeps the ORM rows it locked so :meth:`save` updates them in memory. ``refusal`` is
    the grant rule :meth:`publisher_refusal` applies."""

    def __init__(self, session: AsyncSession, refusal: PublisherRefusal) -> None:
        self.session = session
        self._refusal = refusal
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
        self,
        row: RunRow,
        *,
        children: bool = True,
        held: HeldSteps | None = None,
        outputs: OutputsWanted | None = None,
    ) -> RunState:
        run = self._rows[row.id]
        graph = await graphs.graph_for_version(self.session, row.version_id)  # cached
        return await load_state(
            self.session,
            run,
            children=children,
            steps=held,
            outputs=outputs,
            unread=unread_input(graph, run.input),
        )

    async def graph(self, version_id: uuid.UUID) -> WorkflowGraph:
        return await graphs.graph_for_version(self.session, version_id)

    async def settings(self, workflow_id: uuid.UUID) -> WorkflowSettings:
        return await workflow_settings(self.session, workflow_id)

    async def insert_run(self, new: NewRun, state: RunState | None = None) -> bool:
        await self._flush()
        with duplicate_key(new):
            return (await insert_run(self.session, new, state)).written

    async def insert_queued_runs(self, news: Sequence[NewRun]) -> list[bool]:
        await self._flush()
        if not news:
            return []
        keyed = next((new for new in news if new.idempotency_key is not None), news[0])
        with duplicate_key(keyed):
            return await insert_queued_runs(self.session, news)

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
        # an archived workflow starts no runs (backend.services.workflows.workflow_lifecycle)
        query = select(WorkflowVersion.workflow_id, WorkflowVersion.id, WorkflowVersion.number)
        if number is None:
            query = query.join(
                Workflow,
                (WorkflowVersion.workflow_id == Workflow.id)
                & (WorkflowVersion.number == Workflow.active_version),
            )
        else:
            query = query.join(Workflow, WorkflowVersion.workflow_id == Workflow.id).where(
                WorkflowVersion.number == number
            )
        query = query.where(Workflow.archived_at.is_(None))
        found = (
            await self.session.execute(
                query.where(WorkflowVersion.workflow_id == wf_id, WorkflowVersion.kind == PUBLISHED)
            )
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
        """One ``INSERT ... SELECT`` of every field a write stores, guarded by the target
        run (:func:`of_held_run`)."""
        if not step_ids:
            return
        columns = (_STEP_RUNS.c[name] for name in ("step_id", *STEP_FIELDS))
        source = of_held_run(target_run_id, *columns, joined=_STEP_RUNS).where(
            _STEP_RUNS.c.run_id == source_run_id, _STEP_RUNS.c.step_id.in_(step_ids)
        )
        await self.session.execute(
            insert(_STEP_RUNS).from_select(["run_id", "step_id", *STEP_FIELDS], source)
        )

    async def seed_step(self, run_id: uuid.UUID, step_id: str, data: dict[str, Any]) -> None:
        await self._flush()
        values = {"step_id": step_id, "status": "pending", "ports": [], "attempts": 0, "data": data}
        await self.session.execute(_guarded_insert(_STEP_RUNS, run_id, values))

    async def add_event(self, run_id: uuid.UUID, kind: str, data: dict[str, Any]) -> None:
        await self._flush()
        await self.session.execute(_guarded_insert(_EVENTS, run_id, {"kind": kind, "data": data}))

    async def _flush(self) -> None:
        """Flush pending ORM changes (a statement of this transaction follows)."""
        if self.session.new or self.session.dirty:
            await self.session.flush()

    async def add_audit(self, entry: AuditEntry) -> None:
        await self._flush()
        self.session.add(AuditLog(**dataclasses.asdict(entry)))

    async def publisher_refusal(self, run_id: uuid.UUID, workflow_id: str) -> str | None:
        await self._flush()
        return await self._refusal(self.session, run_id, workflow_id)


def of_held_run(run_id: uuid.UUID, *columns: Any, joined: Table | None = None) -> Select[Any]:
    """``SELECT runs.id, *columns FROM runs WHERE runs.id = run_id FOR KEY SHARE OF runs``
    (``joined``: ``FROM joined JOIN runs ON runs.id = run_id``; the caller adds its
    conditions): the source of a child row insert
    into ``step_runs`` / ``attempts`` / ``events``, which have no foreign key to ``runs``
    (migration 0025_run_children_fk). While the run exists it is key-share locked until
    commit, so its deletion waits and then deletes the child too (trigger
    ``runs_delete_children``); once it is deleted nothing is inserted."""
    held = _RUNS.c.id == run_id
    query = select(_RUNS.c.id, *columns)
    query = query.where(held) if joined is None else query.select_from(joined.join(_RUNS, held))
    return query.with_for_update(read=True, key_share=True, of=_RUNS)


def _guarded_insert(table: Table, run_id: uuid.UUID, values: dict[str, Any]) -> Insert:
    """The insert of one row ``values`` (column -> value) of run ``run_id`` into child
    table ``table``, written only while the run exists (:func:`of_held_run`)."""
    columns = [literal(value, type_=table.c[name].type) for name, value in values.items()]
    return insert(table).from_select(["run_id", *values], of_held_run(run_id, *columns))
