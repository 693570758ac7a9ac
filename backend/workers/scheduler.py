"""The scheduler process: durable timers and recovery, one leader at a time.

Leadership is a PostgreSQL session-level advisory lock held on a dedicated connection:
the first ``railyard scheduler`` to take it sweeps; others stand by and retry every
``sweep_interval`` seconds, so a standby takes over within one interval of the leader's
connection closing (process exit or crash).
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy import text

from backend.runtime import Runtime
from backend.triggers.scheduling import run_schedules

log = logging.getLogger(__name__)

# Any constant unique to Railyard: the ASCII bytes of "RYSCHED" as an integer.
SCHEDULER_LOCK_KEY = 0x52595343484544


async def run_scheduler(runtime: Runtime, stop: asyncio.Event) -> None:
    """Sweep and fire schedules while leader until ``stop`` is set."""
    interval = runtime.settings.sweep_interval
    while not stop.is_set():
        async with runtime.engine.connect() as conn:
            got = (
                await conn.execute(
                    text("select pg_try_advisory_lock(:k)"), {"k": SCHEDULER_LOCK_KEY}
                )
            ).scalar_one()
            await conn.commit()
            if not got:
                log.info("scheduler standing by: another scheduler is leader")
                await _wait(stop, interval)
                continue
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
                        counts = await runtime.execution.sweep(grace_seconds=interval)
                        if any(counts.values()):
                            log.info("sweep: %s", counts)
                    except Exception:  # a failed pass must not end leadership
                        log.exception("sweep failed")
                    await _wait(stop, interval)
            finally:
                firing.cancel()
                await asyncio.gather(firing, return_exceptions=True)
                await conn.execute(text("select pg_advisory_unlock(:k)"), {"k": SCHEDULER_LOCK_KEY})
                await conn.commit()


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        pass
