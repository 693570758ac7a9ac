"""Run timeouts: which runs are past their due time (``runs.deadline_at``), and when the
next one falls due.

The sweeper times overdue runs out on every pass (certain); each worker also waits for
the earliest due time itself (backend/workers/run_control.py), so a run times out within
about a second of its deadline rather than at the next sweep (prompt). Both go through
the execution service's :class:`~backend.services.runs.recovery.Recovery` (its queries read
PostgreSQL: backend/db/recovery_queries.py).
"""

from __future__ import annotations

from datetime import datetime

from backend.services.runs.recovery import Recovery, time_out_overdue

__all__ = ["next_deadline", "time_out_overdue"]


async def next_deadline(recovery: Recovery) -> datetime | None:
    """The earliest ``deadline_at`` of an active run (``None``: no active run has one).

    Raises ``RuntimeError`` when the service was built without recovery queries."""
    if recovery.queries is None:
        raise RuntimeError("this execution service was built without recovery queries")
    return await recovery.queries.next_deadline()
