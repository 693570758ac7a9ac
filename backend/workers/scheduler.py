"""The scheduler process: durable timers, recovery and schedule firing, one leader at a time.

Leadership is a PostgreSQL session-level advisory lock held on a dedicated connection:
the first ``railyard scheduler`` to take it sweeps and fires schedules
(:mod:`backend.triggers.scheduling`); others stand by and retry every
``sweep_interval`` seconds, so a standby takes over within one interval of the leader's
connection closing (process exit or crash).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy import text

from backend.runtime import Runtime
from backend.services.recovery import sweep
from backend.triggers.scheduling import run_schedules

log = logging.getLogger(__name__)

# Any constant unique to Railyard: the ASCII bytes of "RYSCHED" as an integer.
SCHEDULER_LOCK_KEY = 0x52595343484544


async def run_scheduler(runtime: Runtime, stop: asyncio.Event) -> None:
    """Sweep and fire schedules while leader until ``stop`` is set.

    A lost database (PostgreSQL restarted or unreachable) ends leadership (the advisory
    lock went with the connection): schedule firing stops, the error is logged and the
    scheduler tries to take the lock again every ``sweep_interval`` seconds, so it survives
    an outage.
    """
    interval = runtime.settings.sweep_interval
    while not stop.is_set():
        try:
            await _lead(runtime, stop, interval)
        except Exception as exc:  # connection lost: retry, never exit
            log.warning("scheduler lost the database (%s: %s); retrying", type(exc).__name__, exc)
            await _wait(stop, interval)


async def _lead(runtime: Runtime, stop: asyncio.Event, interval: float) -> None:
    """Take the leader lock (or stand by one interval) and sweep while the lock's
    connection answers; raises when that connection is lost."""
    async with runtime.engine.connect() as conn:
        got = (
            await conn.execute(text("select pg_try_advisory_lock(:k)"), {"k": SCHEDULER_LOCK_KEY})
        ).scalar_one()
        await conn.commit()
        if not got:
            log.info("scheduler standing by: another scheduler is leader")
            await _wait(stop, interval)
            return
        log.info("scheduler is leader")
        firing = asyncio.create_task(
            run_schedules(
                runtime.sessionmaker,
                runtime.execution,
                runtime.execution.clock,
                stop,
                tick=runtime.settings.schedule_tick,
            )
        )
        try:
            while not stop.is_set():
                try:
                    counts = await sweep(runtime.execution.recovery, grace_seconds=interval)
                    if any(counts.values()):
                        log.info("sweep: %s", counts)
                except Exception:  # a failed pass must not end leadership
                    log.exception("sweep failed")
                await _wait(stop, interval)
                await conn.execute(text("select 1"))  # still leader: the lock's session lives
                await conn.commit()
        finally:
            firing.cancel()
            await asyncio.gather(firing, return_exceptions=True)
            with contextlib.suppress(Exception):  # a dead connection released it already
                await conn.execute(text("select pg_advisory_unlock(:k)"), {"k": SCHEDULER_LOCK_KEY})
                await conn.commit()


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        pass
