"""The run store: PostgreSQL behind the engine's :class:`~backend.engine.ports.RunStore`.

Every locked transition follows the execution model: a transaction
(:class:`~backend.db.run_transaction.PgRunTransaction`) locks the run row, loads a
:class:`~backend.engine.model.RunState`, lets the pure engine change it, then writes the
changed rows and the outbox events before commit with ONE statement
(:func:`~backend.db.run_writes.write_state`). Runs are inserted one way,
:func:`~backend.db.run_inserts.insert_run` (a start's insert grouped with the inserts of
concurrent starts: :class:`~backend.db.run_inserts.RunInserts`). The session-level
building blocks live in backend/db/run_state.py and are re-exported here.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.db import graphs, payloads
from backend.db.fast_path import FastPath
from backend.db.models import Run, Workflow, WorkflowVersion
from backend.db.run_inserts import RunInserts
from backend.db.run_reads import read_run
from backend.db.run_state import (
    ACTIVE_RUN_STATUSES,
    Steps,
    active_version_of,
    extend_lease,
    finish_attempt,
    load_state,
    lock_run,
    save_state,
    workflow_settings,
)
from backend.db.run_transaction import PgRunTransaction, PublisherRefusal, duplicate_key
from backend.db.run_writes import RunWrites, step_values, write_state
from backend.engine.model import RunState
from backend.engine.ports import (
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
from designer_schema.graph import WorkflowGraph

__all__ = [
    "ACTIVE_RUN_STATUSES",
    "FinishedAttempt",
    "HeldSteps",
    "NewAttempt",
    "PgRunStore",
    "StaleAttempt",
    "Steps",
    "active_version_of",
    "finish_attempt",
    "load_state",
    "lock_run",
    "save_state",
    "step_values",
    "write_state",
]


class PgRunStore:
    """PostgreSQL implementation of :class:`~backend.engine.ports.RunStore`; ``refusal``
    is the grant rule of called workflows its transactions apply
    (:meth:`PgRunTransaction.publisher_refusal`)."""

    def __init__(
        self, sessionmaker: async_sessionmaker[AsyncSession], *, refusal: PublisherRefusal
    ) -> None:
        self.sessionmaker = sessionmaker
        self.refusal = refusal
        self.fast = FastPath(sessionmaker.kw["bind"])
        self.inserts = RunInserts(self.fast)
        self.writes = RunWrites(self.fast)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[PgRunTransaction]:
        async with self.sessionmaker() as session, session.begin():
            yield PgRunTransaction(session, self.refusal)

    async def graph(self, version_id: uuid.UUID) -> WorkflowGraph:
        graph = graphs.cached_graph(version_id)
        if graph is None:
            async with self.sessionmaker() as session:
                graph = await graphs.graph_for_version(session, version_id)
        return graph

    def cached_graph(self, version_id: uuid.UUID) -> WorkflowGraph | None:
        return graphs.cached_graph(version_id)

    async def insert_started(
        self,
        new: NewRun,
        state: RunState,
        settings: WorkflowSettings,
        *,
        start: NewAttempt | None = None,
    ) -> Written:
        with duplicate_key(new):
            inserted = await self.inserts.insert(
                new, state, expected_settings=settings.raw, start=start
            )
        if inserted.written:
            return Written(inserted.revision)
        if inserted.settings_differ:
            return Written(None, moved=True, settings=WorkflowSettings.from_raw(inserted.settings))
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
        return await self.writes.write(
            run_id, state, finish=finish, start=start, expected_revision=expected_revision
        )

    async def read_unlocked(self, run_id: uuid.UUID) -> tuple[RunRow, RunState] | None:
        return await read_run(self.fast, run_id, self.graph)

    async def read_settings(self, workflow_id: uuid.UUID) -> WorkflowSettings:
        async with self.fast.connection() as conn:
            return await workflow_settings(conn, workflow_id)

    async def extend_lease(self, attempt_id: int, token: str, until: datetime) -> bool:
        return await extend_lease(self.fast, attempt_id, token, until)

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
            # a large input is stored by reference (backend/db/payloads.py): the full value
            (run_input,) = await payloads.resolve_values(session, [run.input])
        version = None if found is None else VersionRow(found[0], found[1], int(found[2]))
        return run.status, run_input, version
