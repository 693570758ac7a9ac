"""The scheduler process: durable timers, recovery and schedule firing, one leader at a time.

Leadership is a PostgreSQL session-level advisory lock held on a dedicated connection:
the first ``railyard scheduler`` to take it sweeps, times out runs at their deadline
(:func:`~backend.workers.run_control.enforce_deadlines`), fires schedules
(:mod:`backend.services.triggers.schedule_firing`), polls polling triggers
(:mod:`backend.services.triggers.events.polling`), registers and retires app webhooks
(:mod:`backend.services.triggers.events.lifecycle`), starts the runs of stored trigger events a
crash left without one (:func:`backend.services.triggers.events.inbox.start_pending`), sends
outgoing events to their subscriptions (:mod:`backend.services.subscriptions`) and
applies retention every
``RAILYARD_RETENTION_INTERVAL`` seconds (:mod:`backend.services.operations.retention`); others
stand by, each waiting in PostgreSQL for the lock (:func:`take_leadership`), so a standby
takes over the moment the leader's session ends: the leader stopping (SIGTERM: it lets the
lock go before it exits) or dying (SIGKILL, crash: PostgreSQL ends the session when the
connection closes). A leader whose machine vanishes without closing the connection is
noticed when PostgreSQL's TCP keepalive gives up on it (``tcp_keepalives_*`` settings).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.observability import metrics
from backend.runtime import Runtime
from backend.services.availability import database_unavailable
from backend.services.operations import leadership, retention
from backend.services.operations.leadership import SCHEDULER_LOCK_KEY
from backend.services.runs.recovery import sweep
from backend.services.subscriptions.loop import run_event_deliveries
from backend.services.triggers.events import inbox
from backend.services.triggers.events.lifecycle import run_lifecycle
from backend.services.triggers.events.polling import run_polls
from backend.services.triggers.schedule_firing import run_schedules
from backend.workers.health import Backoff, ServiceHealth
from backend.workers.run_control import enforce_deadlines

log = logging.getLogger(__name__)


class Leadership:
    """Whether this scheduler process leads, for its readiness probe (``"role"``:
    ``"leader"`` or ``"standby"``) and the ``railyard_scheduler_leader`` gauge; ``name``
    is the process as ``<host>:<pid>``, also given to the leader's database session
    (:mod:`backend.services.operations.leadership`)."""

    def __init__(self, name: str | None = None) -> None:
        self.name = name or leadership.process_name()
        self.role = "standby"
        metrics.scheduler_leader(self.name, leads=False)

    def lead(self) -> None:
        """This process took the leader lock."""
        self.role = "leader"
        metrics.scheduler_leader(self.name, leads=True)

    def stand_by(self) -> None:
        """This process does not hold the leader lock (any more)."""
        self.role = "standby"
        metrics.scheduler_leader(self.name, leads=False)

    def describe(self) -> dict[str, str]:
        """What the readiness probe adds to its body: ``{"role": ...}``."""
        return {"role": self.role}


async def apply_retention(runtime: Runtime) -> int:
    """One retention pass over every data class (backend/services/operations/retention.py); returns
    how many rows went in total."""
    results = await retention.run_pass(runtime.sessionmaker, runtime.settings)
    return sum(r.deleted for r in results)


async def _retention_loop(runtime: Runtime, stop: asyncio.Event) -> None:
    """Apply retention at once, then every ``retention_interval`` seconds, beside the
    sweeps (a long pass never delays them)."""
    while not stop.is_set():
        try:
            await apply_retention(runtime)
        except Exception:  # the next pass tries again
            log.exception("retention pass failed")
        await _wait(stop, runtime.settings.retention_interval)


async def run_scheduler(
    runtime: Runtime,
    stop: asyncio.Event,
    health: ServiceHealth | None = None,
    leader: Leadership | None = None,
) -> None:
    """Sweep and fire schedules while leader until ``stop`` is set.

    A lost database (PostgreSQL restarted or unreachable, for any length of time) ends
    leadership (the advisory lock went with the connection): schedule firing stops, one
    warning is logged in ``health`` and the scheduler tries to take the lock again with
    backoff (0.1 s doubling up to ``sweep_interval``), so it survives the outage and
    resumes within one backoff step of the database's return. A Redis outage only delays
    dispatching: the dispatcher logs it and the next sweep dispatches again. ``leader``
    follows whether this process leads (a new :class:`Leadership` when not given).
    """
    interval = runtime.settings.sweep_interval
    health = health or ServiceHealth("scheduler")
    leader = leader or Leadership()
    backoff = Backoff(cap=max(interval, 0.5))
    while not stop.is_set():
        try:
            await _lead(runtime, stop, interval, health, leader)
            backoff.reset()
        except Exception as exc:  # connection lost: retry, never exit
            if database_unavailable(exc):
                health.down("database", exc)
            else:
                log.exception("scheduler pass failed; retrying")
            await _wait(stop, backoff.next())


async def _lead(
    runtime: Runtime,
    stop: asyncio.Event,
    interval: float,
    health: ServiceHealth,
    leader: Leadership,
) -> None:
    """Take the leader lock (or stand by one interval) and sweep while the lock's
    connection answers; raises when that connection is lost."""
    async with runtime.engine.connect() as conn:
        got = await take_leadership(conn, interval)
        health.up("database")
        if not got:
            log.debug("scheduler standing by: another scheduler is leader")
            return
        log.info("scheduler %s is leader", leader.name)
        await leadership.name_session(conn, leader.name)
        leader.lead()
        firing = asyncio.create_task(
            run_schedules(
                runtime.sessionmaker,
                runtime.execution,
                runtime.execution.clock,
                stop,
                tick=runtime.settings.schedule_tick,
            )
        )
        clock = runtime.execution.clock
        tick = runtime.settings.schedule_tick
        polling = asyncio.create_task(run_polls(runtime.events, clock, stop, tick=tick))
        hooks = asyncio.create_task(run_lifecycle(runtime.events, clock, stop, tick=tick))
        deadlines = asyncio.create_task(enforce_deadlines(runtime.execution))
        pruning = asyncio.create_task(_retention_loop(runtime, stop))
        outgoing = asyncio.create_task(
            run_event_deliveries(runtime.sessionmaker, runtime.settings, stop, now=clock.now)
        )
        try:
            while not stop.is_set():
                try:
                    counts = await sweep(runtime.execution.recovery, grace_seconds=interval)
                    counts["trigger_events"] = await inbox.start_pending(
                        runtime.sessionmaker, runtime.execution, clock.now()
                    )
                    if any(counts.values()):
                        log.info("sweep: %s", counts)
                except Exception as exc:  # a failed pass must not end leadership
                    if database_unavailable(exc):
                        health.down("database", exc)
                    else:
                        log.exception("sweep failed")
                await _wait(stop, interval)
                await conn.execute(text("select 1"))  # still leader: the lock's session lives
                await conn.commit()
        finally:
            leader.stand_by()
            background = (firing, polling, hooks, deadlines, pruning, outgoing)
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            with contextlib.suppress(Exception):  # a dead connection released it already
                await conn.execute(text("select pg_advisory_unlock(:k)"), {"k": SCHEDULER_LOCK_KEY})
                await conn.commit()
                await leadership.name_session(conn, None)


LOCK_NOT_AVAILABLE = "55P03"
"""PostgreSQL's SQLSTATE for a lock wait that ran into ``lock_timeout``."""


async def take_leadership(conn: AsyncConnection, wait: float) -> bool:
    """Take the leader lock on ``conn``'s session, waiting at most ``wait`` seconds for
    the current leader to let it go; True when taken.

    A blocking ``pg_advisory_lock`` bounded by a transaction-local ``lock_timeout``: the
    lock is granted the moment the leader's session releases it (no polling delay), and
    the standby looks at its stop signal at least every ``wait`` seconds. Raises
    SQLAlchemy's ``DBAPIError`` for anything but the timeout (connection lost).
    """
    timeout = f"{max(1, round(wait * 1000))}ms"
    try:
        await conn.execute(text("select set_config('lock_timeout', :t, true)"), {"t": timeout})
        await conn.execute(text("select pg_advisory_lock(:k)"), {"k": SCHEDULER_LOCK_KEY})
    except DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) != LOCK_NOT_AVAILABLE:
            raise
        await conn.rollback()
        return False
    await conn.commit()  # a session-level lock outlives the transaction that took it
    return True


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        pass
