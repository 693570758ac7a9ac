"""Retention: remove run data, events, files and audit rows once the rules say so.

Each data class has an age rule (``RAILYARD_RETENTION_<CLASS>_DAYS``) and a count rule
(``..._MAX``: keep the newest N); ``0`` turns a rule off, and a row goes when either rule
says so. Only runs that ended (succeeded, failed, cancelled, timed out) are touched; a
waiting run keeps everything however old it is.

- ``runs``: the run with its step records, attempts and events; by end time (age) and
  the newest N ended runs by end time (count).
- ``payloads``: run values (inputs, outputs and responses of the run, its step records
  and attempts) set to null, while status, times and errors stay; by end time.
- ``steps``: step records and attempts of a run (the run row stays); by end time.
- ``events``: outbox events; by creation (age) and the newest N (count).
- ``files``: files uploaded to webhooks; by upload time.
- ``versions``: published workflow versions nothing needs any more, by publication time
  and the newest N per workflow (backend/services/operations/retention_versions.py says what keeps
  one); the workflow itself is never removed.
- ``trigger_events``: the event inbox of connector triggers (the ids that keep each event
  to one run) and their dead letters, by receipt, after as many days as runs
  (``RAILYARD_RETENTION_RUNS_DAYS``; off when that is): an event is remembered as long as
  the runs it could have started.
- ``deliveries``: the delivery log of outgoing event subscriptions (each delivery with its
  attempts) once delivered or given up, by creation (``RAILYARD_RETENTION_DELIVERIES_DAYS``);
  a pending delivery stays until it is sent or given up.
- ``audit``: audit rows, by age only (``RAILYARD_AUDIT_RETENTION_DAYS``).
- ``large_values``: stored large values (the ``payloads`` table) no kept run can
  reference; always on.

How it avoids long locks: every class is removed in batches of ``RAILYARD_RETENTION_BATCH``
rows, each batch its own short transaction with a 2 s lock timeout, and rows locked by a
worker at that moment are skipped (``FOR UPDATE SKIP LOCKED``; the next pass takes them).
A pass does at most :data:`MAX_BATCHES` batches per class and continues in the next pass.
The ``payloads`` and ``steps`` classes walk ended runs by end time from where the previous
pass stopped (its cutoff), so rows already cleared are not scanned again.

Large values are shared by content between runs, so one is deleted only when its last use
(``payloads.last_used_at``, set at every write that references it) is older than every run
whose values are kept, and at least a day old (a transaction writing a reference now is
never that long).

The audit log is append-only in PostgreSQL; rows leave only through
``audit_log_purge(keep_days, max_rows)`` (migration ``0021_retention``), which deletes the
oldest rows past the age and nothing else; each batch that deleted any is itself audited
(``audit.purge``, in the batch's transaction). A count rule is not offered for the audit
log: a burst of actions must not be able to push evidence out.

Each pass writes one ``retention_passes`` row per class (what went, cutoff, batches, the
error if one stopped it) and one ``retention.prune`` audit row per class that removed
anything; the dashboard shows the recent ones.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.db.models import RetentionPass
from backend.observability import metrics
from backend.services import audit
from backend.services.operations import audit_log
from backend.services.operations import retention_versions as versions
from backend.services.operations.retention_events import (
    DELETE_DUE_EVENTS,
    LAST_DUE_EVENT,
    NEWEST_EVENT,
)
from backend.services.timestamps import rfc3339
from backend.settings import Settings

log = logging.getLogger(__name__)

MAX_BATCHES = 200
"""Batches per class per pass (the next pass continues)."""
PAYLOAD_MARGIN = timedelta(days=1)
"""A large value younger than this is never deleted (see the module docstring)."""
CLASSES = (
    "runs",
    "payloads",
    "steps",
    "events",
    "files",
    "versions",
    "trigger_events",
    "deliveries",
    "audit",
    "large_values",
)
"""Every data class, in the order a pass handles them."""

_ENDED = "('succeeded','failed','cancelled','timed_out')"


@dataclass(frozen=True)
class Rule:
    """The retention rule of one data class: ``days`` (0: no age limit) and ``max_rows``
    (0: no count limit)."""

    data_class: str
    days: int
    max_rows: int = 0

    @property
    def active(self) -> bool:
        """True when the rule removes anything at all."""
        return self.days > 0 or self.max_rows > 0


def rules(settings: Settings) -> dict[str, Rule]:
    """The rules of ``settings`` by data class (``large_values`` is always on)."""
    return {
        "runs": Rule("runs", settings.retention_runs_days, settings.retention_runs_max),
        "payloads": Rule(
            "payloads", settings.retention_payloads_days, settings.retention_payloads_max
        ),
        "steps": Rule("steps", settings.retention_steps_days, settings.retention_steps_max),
        "events": Rule("events", settings.retention_events_days, settings.retention_events_max),
        "files": Rule("files", settings.retention_files_days, settings.retention_files_max),
        "versions": Rule(
            "versions", settings.retention_versions_days, settings.retention_versions_max
        ),
        "trigger_events": Rule("trigger_events", settings.retention_runs_days),
        "deliveries": Rule("deliveries", settings.retention_deliveries_days),
        "audit": Rule("audit", settings.audit_retention_days),
        "large_values": Rule("large_values", 1),
    }


@dataclass
class PassResult:
    """What one pass did to one class: ``deleted`` rows (cleared runs for ``payloads``)
    in ``batches`` transactions; ``cutoff``: rows older than it were due; ``error`` when
    the pass stopped early (what went before stays gone)."""

    data_class: str
    deleted: int = 0
    batches: int = 0
    cutoff: datetime | None = None
    max_rows: int | None = None
    error: str | None = None


Sessions = async_sessionmaker[AsyncSession]
Batch = Callable[[AsyncSession], Awaitable[int]]


async def _batches(sessions: Sessions, result: PassResult, batch: Batch) -> None:
    """Run ``batch`` (one short transaction each) until it removes nothing or
    :data:`MAX_BATCHES` ran; counts into ``result``."""
    while result.batches < MAX_BATCHES:
        async with sessions() as session, session.begin():
            await session.execute(text("set local lock_timeout = '2s'"))
            n = await batch(session)
        result.batches += 1
        result.deleted += n
        if n == 0:
            break


async def _scalar(sessions: Sessions, sql: str, **params: Any) -> Any:
    async with sessions() as session:
        return (await session.execute(text(sql), params)).scalar()


async def _cutoff(
    sessions: Sessions, rule: Rule, now: datetime, nth_newest: str
) -> datetime | None:
    """The time before which rows are due under ``rule``: the later of ``now - days`` and
    the time of the ``max_rows``-th newest row (``nth_newest``: SQL selecting that time
    with ``offset :o limit 1``); None when neither rule applies."""
    cutoffs = []
    if rule.days:
        cutoffs.append(now - timedelta(days=rule.days))
    if rule.max_rows:
        nth = await _scalar(sessions, nth_newest, o=rule.max_rows - 1)
        if nth is not None:
            cutoffs.append(nth)
    return max(cutoffs) if cutoffs else None


def _ended_cutoff(sessions: Sessions, rule: Rule, now: datetime) -> Awaitable[datetime | None]:
    """:func:`_cutoff` on the end time of ended runs."""
    return _cutoff(
        sessions,
        rule,
        now,
        f"select finished_at from runs where status in {_ENDED} and finished_at is not null"
        " order by finished_at desc offset :o limit 1",
    )


def _created_cutoff(
    sessions: Sessions, rule: Rule, table: str, now: datetime
) -> Awaitable[datetime | None]:
    """:func:`_cutoff` on ``table.created_at`` (``events``: :mod:`.retention_events`)."""
    newest = f"select created_at from {table} order by created_at desc offset :o limit 1"
    return _cutoff(sessions, rule, now, NEWEST_EVENT if table == "events" else newest)


async def _delete_batches(sessions: Sessions, result: PassResult, sql: str, **params: Any) -> None:
    """Run the batch statement ``sql`` (a DELETE of at most ``:n`` rows) until it deletes
    nothing; ``params`` fill its other parameters."""
    statement = text(sql)

    async def batch(session: AsyncSession) -> int:
        res = await session.execute(statement, params)
        return int(getattr(res, "rowcount", 0) or 0)

    await _batches(sessions, result, batch)


def _prune_runs(
    sessions: Sessions, result: PassResult, cutoff: datetime, size: int
) -> Awaitable[None]:
    return _delete_batches(
        sessions,
        result,
        f"delete from runs where id in (select id from runs where status in {_ENDED}"
        " and finished_at < :cutoff limit :n for update skip locked)",
        cutoff=cutoff,
        n=size,
    )


_CLEAR_VALUES = (
    "update runs set input = null, output = null, response = null"
    " where id = any(:ids) and (input is not null or output is not null or response is not null)",
    "update step_runs set input = null, output = null, data = null"
    " where run_id = any(:ids) and (input is not null or output is not null or data is not null)",
    "update attempts set input = null, output = null, config = null"
    " where run_id = any(:ids) and (input is not null or output is not null or config is not null)",
)
_DROP_STEPS = (
    "delete from attempts where run_id = any(:ids)",
    "delete from step_runs where run_id = any(:ids)",
)


async def _walk_ended_runs(
    sessions: Sessions,
    result: PassResult,
    lower: datetime | None,
    cutoff: datetime,
    size: int,
    statements: tuple[str, ...],
) -> None:
    """Apply ``statements`` (each taking ``:ids``) to ended runs with ``lower <= end <
    cutoff``, in end-time order, one batch of run ids per transaction; counts runs."""
    last: tuple[datetime, uuid.UUID] | None = None
    pick = text(
        f"select id, finished_at from runs where status in {_ENDED}"
        " and finished_at < :cutoff and finished_at >= :lower"
        " and (cast(:last_at as timestamptz) is null"
        "      or (finished_at, id) > (cast(:last_at as timestamptz), cast(:last_id as uuid)))"
        " order by finished_at, id limit :n for update skip locked"
    )

    async def batch(session: AsyncSession) -> int:
        nonlocal last
        rows = (
            await session.execute(
                pick,
                {
                    "cutoff": cutoff,
                    "lower": lower or datetime(1970, 1, 1, tzinfo=UTC),
                    "last_at": last[0] if last else None,
                    "last_id": last[1] if last else None,
                    "n": size,
                },
            )
        ).all()
        if not rows:
            return 0
        ids = [r[0] for r in rows]
        for sql in statements:
            await session.execute(text(sql), {"ids": ids})
        last = (rows[-1][1], rows[-1][0])
        return len(ids)

    await _batches(sessions, result, batch)


async def _last_cutoff(sessions: Sessions, data_class: str) -> datetime | None:
    """The cutoff of the last pass of ``data_class`` that ended without an error."""
    async with sessions() as session:
        return (
            await session.execute(
                select(func.max(RetentionPass.cutoff)).where(
                    RetentionPass.data_class == data_class, RetentionPass.error.is_(None)
                )
            )
        ).scalar()


async def _prune_events(
    sessions: Sessions, result: PassResult, cutoff: datetime, size: int
) -> None:
    """Delete the events created before ``cutoff`` in batches of ``size`` (in id order,
    :mod:`.retention_events`)."""
    last = await _scalar(sessions, LAST_DUE_EVENT, c=cutoff)
    if last is not None:
        await _delete_batches(sessions, result, DELETE_DUE_EVENTS, last=last, cutoff=cutoff, n=size)


def _prune_created(
    sessions: Sessions, result: PassResult, table: str, cutoff: datetime, size: int
) -> Awaitable[None]:
    return _delete_batches(
        sessions,
        result,
        f"delete from {table} where id in (select id from {table}"
        " where created_at < :cutoff limit :n for update skip locked)",
        cutoff=cutoff,
        n=size,
    )


async def _prune_large_values(
    sessions: Sessions, result: PassResult, payload_cutoff: datetime | None, now: datetime
) -> None:
    """Delete stored large values whose last use precedes every run whose values are kept."""
    if payload_cutoff is None:
        oldest = await _scalar(sessions, "select min(created_at) from runs")
    else:
        oldest = await _scalar(
            sessions,
            f"select min(created_at) from runs where status not in {_ENDED}"
            " or finished_at is null or finished_at >= :c",
            c=payload_cutoff,
        )
    horizon = now - PAYLOAD_MARGIN
    if oldest is not None:
        horizon = min(horizon, oldest - PAYLOAD_MARGIN)
    result.cutoff = horizon
    await _delete_batches(
        sessions,
        result,
        "delete from payloads where sha256 in (select sha256 from payloads"
        " where last_used_at < :h limit :n for update skip locked)",
        h=horizon,
        n=100,
    )


async def _prune_audit(sessions: Sessions, result: PassResult, days: int, size: int) -> None:
    async def batch(session: AsyncSession) -> int:
        return await audit_log.purge_expired(session, days, max_rows=size)

    await _batches(sessions, result, batch)


async def _class_pass(
    sessions: Sessions,
    rule: Rule,
    settings: Settings,
    now: datetime,
    payload_cutoff: datetime | None,
    result: PassResult,
) -> None:
    size = settings.retention_batch
    name = rule.data_class
    if name == "runs":
        result.cutoff = await _ended_cutoff(sessions, rule, now)
        if result.cutoff is not None:
            await _prune_runs(sessions, result, result.cutoff, size)
    elif name in ("payloads", "steps"):
        result.cutoff = await _ended_cutoff(sessions, rule, now)
        if result.cutoff is not None:
            lower = await _last_cutoff(sessions, name)
            statements = _CLEAR_VALUES if name == "payloads" else _DROP_STEPS
            await _walk_ended_runs(sessions, result, lower, result.cutoff, size, statements)
    elif name in ("events", "files"):
        result.cutoff = await _created_cutoff(sessions, rule, name, now)
        if result.cutoff is not None and name == "events":
            await _prune_events(sessions, result, result.cutoff, size)
        elif result.cutoff is not None:
            await _prune_created(sessions, result, name, result.cutoff, size)
    elif name == "versions":
        result.cutoff = now - timedelta(days=rule.days) if rule.days else None
        await _batches(
            sessions,
            result,
            lambda session: versions.prune_batch(session, result.cutoff, rule.max_rows, size),
        )
    elif name == "trigger_events":
        result.cutoff = now - timedelta(days=rule.days)
        for table in ("trigger_events", "trigger_dead_letters"):
            await _delete_batches(
                sessions,
                result,
                f"delete from {table} where id in (select id from {table}"
                " where received_at < :cutoff limit :n for update skip locked)",
                cutoff=result.cutoff,
                n=size,
            )
    elif name == "deliveries":  # their attempts go with them (on delete cascade)
        result.cutoff = now - timedelta(days=rule.days)
        await _delete_batches(
            sessions,
            result,
            "delete from event_deliveries where id in (select id from event_deliveries"
            " where created_at < :cutoff and status <> 'pending' limit :n for update skip locked)",
            cutoff=result.cutoff,
            n=size,
        )
    elif name == "audit":
        result.cutoff = now - timedelta(days=rule.days)
        await _prune_audit(sessions, result, rule.days, size)
    elif name == "large_values":
        await _prune_large_values(sessions, result, payload_cutoff, now)


async def run_pass(
    sessions: Sessions, settings: Settings, *, now: datetime | None = None
) -> list[PassResult]:
    """One retention pass over every class whose rule is on (see the module docstring).

    A failing class is recorded with its error and the pass goes on with the next one.
    Returns one :class:`PassResult` per class handled; each is also stored in
    ``retention_passes``, counted in ``railyard_retention_deleted_total`` and, when it
    removed anything, audited as ``retention.prune``.
    """
    now = now or datetime.now(UTC)
    results = []
    by_class = rules(settings)
    payload_rule = by_class["payloads"]
    payload_cutoff = (
        await _ended_cutoff(sessions, payload_rule, now) if payload_rule.active else None
    )
    for name in CLASSES:
        rule = by_class[name]
        if not rule.active:
            continue
        started = datetime.now(UTC)
        result = PassResult(name, max_rows=rule.max_rows or None)
        try:
            await _class_pass(sessions, rule, settings, now, payload_cutoff, result)
        except asyncio.CancelledError:  # the process stops: say what went so far
            result.error = "stopped before the end; the next pass continues"
            metrics.retention_deleted(name, result.deleted)
            await asyncio.shield(_record(sessions, result, started))
            raise
        except Exception as exc:  # recorded; the other classes still run
            log.exception("retention of %s failed", name)
            result.error = f"{type(exc).__name__}: {exc}"[:500]
        metrics.retention_deleted(name, result.deleted)
        await _record(sessions, result, started)
        results.append(result)
    return results


async def _record(sessions: Sessions, result: PassResult, started: datetime) -> None:
    async with sessions() as session, session.begin():
        session.add(
            RetentionPass(
                data_class=result.data_class,
                started_at=started,
                finished_at=datetime.now(UTC),
                cutoff=result.cutoff,
                max_rows=result.max_rows,
                deleted=result.deleted,
                batches=result.batches,
                error=result.error,
            )
        )
        if result.deleted and result.data_class != "audit":  # audit batches record themselves
            await audit.record(
                session,
                "retention.prune",
                "retention",
                result.data_class,
                details={
                    "deleted": result.deleted,
                    "cutoff": rfc3339(result.cutoff),
                    "max_rows": result.max_rows,
                },
            )
    if result.deleted:
        log.info(
            "retention: %d %s removed (before %s)", result.deleted, result.data_class, result.cutoff
        )
