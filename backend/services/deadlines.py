"""Run timeouts: which runs are past their due time (``runs.deadline_at``), and when the
next one falls due.

The sweeper calls :func:`time_out_overdue` on every pass (certain); each worker also waits
for the earliest due time itself (backend/workers/run_control.py), so a run times out
within about a second of its deadline rather than at the next sweep (prompt).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select

from backend.db.models import Run
from backend.services.execution import ACTIVE_RUN_STATUSES, Execution, RunNotFound


async def time_out_overdue(execution: Execution, *, limit: int = 500) -> int:
    """Time out the active runs whose ``deadline_at`` has passed (at most ``limit``);
    returns how many this call ended (another process may have ended some first)."""
    now = execution.clock.now()
    async with execution.sessionmaker() as session:
        overdue = (
            (
                await session.execute(
                    select(Run.id)
                    .where(Run.status.in_(ACTIVE_RUN_STATUSES), Run.deadline_at < now)
                    .limit(limit)
                )
            )
            .scalars()
            .all()
        )
    ended = 0
    for run_id in overdue:
        try:
            ended += int(await execution.timeout_run(run_id))
        except RunNotFound:
            pass
    return ended


async def next_deadline(execution: Execution) -> datetime | None:
    """The earliest ``deadline_at`` of an active run (``None``: no active run has one).

    Served by the partial index ``ix_runs_deadline`` (active runs only)."""
    async with execution.sessionmaker() as session:
        return (
            await session.execute(
                select(func.min(Run.deadline_at)).where(Run.status.in_(ACTIVE_RUN_STATUSES))
            )
        ).scalar_one_or_none()
