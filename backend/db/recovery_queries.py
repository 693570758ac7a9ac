"""What the recovery sweep reads from PostgreSQL (the truth); each query is bounded."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.db.models import Attempt, Run, StepRun, Workflow
from backend.db.run_store import ACTIVE_RUN_STATUSES
from backend.engine.states import RunStatus, StepStatus
from backend.engine.step_timeouts import TIMEOUT_AT


class PgRecoveryQueries:
    """PostgreSQL implementation of :class:`~backend.services.runs.recovery.RecoveryQueries`."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self.sessionmaker = sessionmaker

    async def overdue_runs(self, now: datetime) -> list[uuid.UUID]:
        """Active runs whose run timeout's due time passed (at most 500)."""
        async with self.sessionmaker() as session:
            found = await session.execute(
                select(Run.id)
                .where(Run.status.in_(ACTIVE_RUN_STATUSES), Run.deadline_at < now)
                .limit(500)
            )
            return list(found.scalars().all())

    async def next_deadline(self) -> datetime | None:
        """The earliest ``deadline_at`` of an active run (``None``: no active run has one);
        served by the partial index ``ix_runs_deadline`` (active runs only)."""
        async with self.sessionmaker() as session:
            return (
                await session.execute(
                    select(func.min(Run.deadline_at)).where(Run.status.in_(ACTIVE_RUN_STATUSES))
                )
            ).scalar_one_or_none()

    async def expired_attempts(self, now: datetime) -> list[tuple[int, uuid.UUID, str, str]]:
        """``(attempt id, run id, step id, fencing token)`` of running attempts whose lease
        ran out (at most 500)."""
        async with self.sessionmaker() as session:
            found = await session.execute(
                select(Attempt.id, Attempt.run_id, Attempt.step_id, Attempt.fencing_token)
                .where(Attempt.status == "running", Attempt.lease_expires_at < now)
                .limit(500)
            )
            return [(int(a), r, str(s), str(t)) for a, r, s, t in found]

    async def ready_steps(self, due_before: datetime) -> list[tuple[uuid.UUID, str]]:
        """``(run id, step id)`` of ready steps of active runs due before ``due_before``."""
        async with self.sessionmaker() as session:
            found = await session.execute(
                select(StepRun.run_id, StepRun.step_id)
                .join(Run, Run.id == StepRun.run_id)
                .where(
                    StepRun.status == StepStatus.READY.value,
                    StepRun.not_before < due_before,
                    Run.status.in_([RunStatus.RUNNING.value, RunStatus.WAITING.value]),
                )
                .limit(1000)
            )
            return [(r, str(s)) for r, s in found]

    async def waits_past_timeout(self, before: datetime) -> list[tuple[uuid.UUID, str]]:
        """``(run id, step id)`` of call steps of active runs still waiting after their
        step timeout's due time (``not_before``) passed before ``before``."""
        async with self.sessionmaker() as session:
            found = await session.execute(
                select(StepRun.run_id, StepRun.step_id)
                .join(Run, Run.id == StepRun.run_id)
                .where(
                    StepRun.status == StepStatus.RUNNING.value,
                    StepRun.not_before < before,
                    StepRun.data.has_key(TIMEOUT_AT),
                    Run.status.in_([RunStatus.RUNNING.value, RunStatus.WAITING.value]),
                )
                .limit(1000)
            )
            return [(r, str(s)) for r, s in found]

    async def queued_runs(
        self, created_before: datetime
    ) -> list[tuple[uuid.UUID, uuid.UUID, dict[str, Any] | None]]:
        """``(run id, workflow id, workflow settings JSON)`` of runs queued since before
        ``created_before`` (child runs included; at most 1000)."""
        async with self.sessionmaker() as session:
            found = await session.execute(
                select(Run.id, Run.workflow_id, Workflow.settings)
                .join(Workflow, Workflow.id == Run.workflow_id)
                .where(Run.status == RunStatus.QUEUED.value, Run.created_at < created_before)
                .limit(1000)
            )
            return [(r, w, s) for r, w, s in found]

    async def waiting_parents(self, ended_before: datetime) -> list[uuid.UUID]:
        """Parents whose calling step still runs although a child ended before
        ``ended_before`` (a lost wake-up)."""
        async with self.sessionmaker() as session:
            found = await session.execute(
                select(Run.parent_run_id)
                .join(
                    StepRun,
                    (StepRun.run_id == Run.parent_run_id) & (StepRun.step_id == Run.parent_step_id),
                )
                .where(
                    Run.status.in_([s.value for s in RunStatus if s.terminal]),
                    Run.finished_at < ended_before,
                    StepRun.status == StepStatus.RUNNING.value,
                )
                .distinct()
                .limit(1000)
            )
            return [p for p in found.scalars().all() if p is not None]
