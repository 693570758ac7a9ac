"""Schedule firing: the scheduler's loop that starts runs at fire instants.

:func:`fire_due` is one pass (claim due instants, start their runs, finish fires left
pending by a crashed scheduler); :func:`run_schedules` repeats it, waking at the next fire
instant (at most ``schedule_tick`` seconds apart). Time comes from a ``Clock`` port, so
tests drive it with a fake clock. Runs start on the workflow's active version with the
idempotency key ``schedule:<schedule id>:<instant ISO>``, so a fire started twice (two
schedulers recovering the same pending fire) is still one run.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.db.models import WorkflowVersion
from backend.engine.ports import Clock
from backend.observability import metrics
from backend.services.runs.execution import Execution, active_version_of
from backend.services.triggers import schedules

log = logging.getLogger(__name__)


def run_input(fire: schedules.ClaimedFire, fired_at: datetime) -> dict[str, Any]:
    """The run input of a scheduled run (instants as ISO 8601 UTC)."""
    from zoneinfo import ZoneInfo

    return {
        "schedule_id": str(fire.schedule_id),
        "scheduled_at": fire.fire_at.isoformat(),
        "fired_at": fired_at.isoformat(),
        "timezone": fire.timezone,
        "local_time": fire.fire_at.astimezone(ZoneInfo(fire.timezone)).isoformat(),
        "catch_up": fire.catch_up,
    }


async def _active_version(
    sessionmaker: async_sessionmaker[AsyncSession], fire: schedules.ClaimedFire
) -> WorkflowVersion | None:
    async with sessionmaker() as session:
        return await active_version_of(session, fire.workflow_id)


async def start_fire(
    sessionmaker: async_sessionmaker[AsyncSession],
    execution: Execution,
    clock: Clock,
    fire: schedules.ClaimedFire,
) -> bool:
    """Start the run of one claimed fire and record it; False when nothing could start."""
    version = await _active_version(sessionmaker, fire)
    if version is None:
        log.warning("schedule %s: workflow has no active version", fire.schedule_id)
        return False
    fired_at = clock.now()
    started = await execution.start_run(
        version,
        run_input(fire, fired_at),
        trigger="schedule",
        idempotency_key=f"schedule:{fire.schedule_id}:{fire.fire_at.isoformat()}",
    )
    async with sessionmaker() as session, session.begin():
        await schedules.record_started(session, fire, started.run_id, fired_at)
    metrics.schedule_lag((fired_at - fire.fire_at).total_seconds(), catch_up=fire.catch_up)
    return True


async def fire_due(
    sessionmaker: async_sessionmaker[AsyncSession], execution: Execution, clock: Clock
) -> int:
    """One pass at ``clock.now()``. Returns how many fires this pass started."""
    claimed = await schedules.claim_due(sessionmaker, clock.now())
    started = 0
    for fire in claimed:
        try:
            started += await start_fire(sessionmaker, execution, clock, fire)
        except Exception:  # left pending; the recovery below or the next pass retries it
            log.exception("schedule %s: starting the run failed", fire.schedule_id)
    for fire in await schedules.pending_fires(sessionmaker):
        try:
            await start_fire(sessionmaker, execution, clock, fire)
        except Exception:
            log.exception("schedule %s: recovering a pending fire failed", fire.schedule_id)
    return started


async def run_schedules(
    sessionmaker: async_sessionmaker[AsyncSession],
    execution: Execution,
    clock: Clock,
    stop: asyncio.Event,
    *,
    tick: float = 1.0,
) -> None:
    """Fire schedules until ``stop`` is set, sleeping until the next instant (<= ``tick`` s)."""
    while not stop.is_set():
        try:
            await fire_due(sessionmaker, execution, clock)
            due = await schedules.next_due(sessionmaker)
        except Exception:  # a failed pass must not stop the loop
            log.exception("schedule pass failed")
            due = None
        delay = tick
        if due is not None:
            delay = max(0.0, min(tick, (due - clock.now()).total_seconds()))
        try:
            await asyncio.wait_for(stop.wait(), delay)
        except TimeoutError:
            pass
