"""Schedule use cases: sync a schedule on publish, claim due fire instants, preview.

Exactly one run per fire instant, whatever number of schedulers run: a pass claims a
schedule's due instants with ``UPDATE schedules SET next_fire_at = :new WHERE id = :id AND
next_fire_at = :old AND revision = :rev`` and inserts one ``schedule_fires`` row per instant
(unique ``(schedule_id, fire_at)``) in the same transaction; only the pass whose update hit
the row starts the runs, each with the idempotency key ``schedule:<id>:<instant>``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.db.models import Schedule, ScheduleFire
from backend.services import audit
from backend.services.timestamps import rfc3339
from backend.triggers.schedule_rules import (
    ScheduleError,
    ScheduleSpec,
    next_fire,
    parse_spec,
    plan_fires,
    upcoming,
)

SCHEDULE_TRIGGER = "trigger.schedule"


@dataclass(frozen=True)
class ClaimedFire:
    """A fire instant this process owns and must start a run for."""

    fire_id: int
    schedule_id: uuid.UUID
    workflow_id: uuid.UUID
    fire_at: datetime
    catch_up: bool
    timezone: str


def trigger_config(graph: dict[str, Any]) -> tuple[str | None, str | None, dict[str, Any]]:
    """``(node type, step id, config)`` of a compiled graph's trigger step."""
    for step in graph.get("steps", []):
        if step.get("id") == graph.get("trigger"):
            return step.get("type"), step.get("id"), dict(step.get("config") or {})
    return None, None, {}


def spec_of(definition: dict[str, Any]) -> ScheduleSpec:
    """Parse a stored definition (raises :class:`ScheduleError`)."""
    return parse_spec(definition)


async def sync_schedule(
    session: AsyncSession,
    workflow_id: uuid.UUID,
    version_number: int,
    graph: dict[str, Any],
    now: datetime,
) -> Schedule | None:
    """Make the workflow's schedule row follow the graph now active.

    A changed definition gets a new revision and its next fire time from ``now`` (the old
    definition never fires again); an unchanged one keeps its next fire time. A graph
    without a schedule trigger disables the row. Raises :class:`ScheduleError` (with the
    field) for an invalid definition.
    """
    node_type, _, config = trigger_config(graph)
    row = (
        await session.execute(
            select(Schedule).where(Schedule.workflow_id == workflow_id).with_for_update()
        )
    ).scalar_one_or_none()
    if node_type != SCHEDULE_TRIGGER:
        if row is not None:
            await _disable(session, row)
        return row
    spec = parse_spec(config)
    if row is not None and row.definition == config and row.enabled == spec.enabled:
        row.version_number = version_number
        return row
    before = _audited(row) if row is not None else None
    if row is None:
        row = Schedule(workflow_id=workflow_id, revision=0)
        session.add(row)
    row.version_number = version_number
    row.definition = config
    row.revision = (row.revision or 0) + 1
    row.enabled = spec.enabled
    row.anchor_at = now
    row.next_fire_at = next_fire(spec, now, now) if spec.enabled else None
    await session.flush()
    await _record(session, "schedule.create" if before is None else "schedule.update", row, before)
    return row


async def disable_schedule(session: AsyncSession, workflow_id: uuid.UUID) -> None:
    """Stop the workflow's schedule (its workflow was archived): no fire after this;
    :func:`sync_schedule` with the active version's graph starts it again."""
    row = (
        await session.execute(
            select(Schedule).where(Schedule.workflow_id == workflow_id).with_for_update()
        )
    ).scalar_one_or_none()
    if row is not None:
        await _disable(session, row)


async def _disable(session: AsyncSession, row: Schedule) -> None:
    """Disable an enabled schedule row (new revision, no next fire), audited."""
    if not row.enabled:
        return
    disabled_from = _audited(row)
    row.enabled = False
    row.next_fire_at = None
    row.revision += 1
    await _record(session, "schedule.disable", row, disabled_from)


def _audited(row: Schedule) -> dict[str, Any]:
    """The audited state of a schedule: its definition (the trigger config) and whether
    it is enabled."""
    return {"definition": dict(row.definition or {}), "enabled": bool(row.enabled)}


async def _record(
    session: AsyncSession, action: str, row: Schedule, before: dict[str, Any] | None
) -> None:
    await session.flush()
    await audit.record(
        session,
        action,
        "schedule",
        row.id,
        before=before,
        after=_audited(row),
        details={"workflow_id": str(row.workflow_id), "version": row.version_number},
    )


async def claim_due(
    sessionmaker: async_sessionmaker[AsyncSession], now: datetime, *, limit: int = 100
) -> list[ClaimedFire]:
    """Claim every due fire instant (see the module docstring); returns what this pass owns."""
    async with sessionmaker() as session:
        rows = (
            await session.execute(
                select(
                    Schedule.id,
                    Schedule.workflow_id,
                    Schedule.revision,
                    Schedule.next_fire_at,
                    Schedule.definition,
                    Schedule.anchor_at,
                )
                .where(Schedule.enabled, Schedule.next_fire_at <= now)
                .order_by(Schedule.next_fire_at)
                .limit(limit)
            )
        ).all()
    claimed: list[ClaimedFire] = []
    for sched_id, workflow_id, revision, old_next, definition, anchor in rows:
        try:
            spec = spec_of(definition)
        except ScheduleError:
            spec = None
        async with sessionmaker() as session, session.begin():
            plan = plan_fires(spec, old_next, now, anchor) if spec is not None else None
            result = await session.execute(
                update(Schedule)
                .where(
                    Schedule.id == sched_id,
                    Schedule.next_fire_at == old_next,
                    Schedule.revision == revision,
                )
                .values(
                    next_fire_at=plan.next_fire_at if plan else None,
                    enabled=plan is not None,
                )
            )
            if result.rowcount != 1 or plan is None or spec is None:  # type: ignore[attr-defined]
                continue
            zone = spec.tz.key
            for fire_at, catch_up in plan.fires:
                fire_id = (
                    await session.execute(
                        insert(ScheduleFire)
                        .values(
                            schedule_id=sched_id,
                            revision=revision,
                            fire_at=fire_at,
                            claimed_at=now,
                            catch_up=catch_up,
                        )
                        .on_conflict_do_nothing(index_elements=["schedule_id", "fire_at"])
                        .returning(ScheduleFire.id)
                    )
                ).scalar_one_or_none()
                if fire_id is not None:
                    claimed.append(
                        ClaimedFire(fire_id, sched_id, workflow_id, fire_at, catch_up, zone)
                    )
    return claimed


async def pending_fires(
    sessionmaker: async_sessionmaker[AsyncSession], *, limit: int = 100
) -> list[ClaimedFire]:
    """Claimed fires whose run was never recorded (a scheduler died in between)."""
    async with sessionmaker() as session:
        rows = (
            await session.execute(
                select(
                    ScheduleFire.id,
                    ScheduleFire.schedule_id,
                    Schedule.workflow_id,
                    ScheduleFire.fire_at,
                    ScheduleFire.catch_up,
                    Schedule.definition,
                )
                .join(Schedule, Schedule.id == ScheduleFire.schedule_id)
                .where(ScheduleFire.run_id.is_(None))
                .order_by(ScheduleFire.id)
                .limit(limit)
            )
        ).all()
    return [
        ClaimedFire(fid, sid, wid, at, cu, str((d or {}).get("timezone") or "UTC"))
        for fid, sid, wid, at, cu, d in rows
    ]


async def record_started(
    session: AsyncSession, fire: ClaimedFire, run_id: uuid.UUID, started_at: datetime
) -> None:
    """Store the run of a fire and its lag (``started_at - fire_at``, milliseconds), and
    audit the start (``run.start``, no actor, details ``trigger: schedule``) once: only
    the pass whose update records the run writes the audit row."""
    result = await session.execute(
        update(ScheduleFire)
        .where(ScheduleFire.id == fire.fire_id, ScheduleFire.run_id.is_(None))
        .values(
            run_id=run_id,
            started_at=started_at,
            lag_ms=func.extract("epoch", started_at - ScheduleFire.fire_at) * 1000.0,
        )
    )
    if result.rowcount == 1:  # type: ignore[attr-defined]
        await audit.record(
            session,
            "run.start",
            "run",
            run_id,
            details={
                "trigger": "schedule",
                "workflow_id": str(fire.workflow_id),
                "schedule_id": str(fire.schedule_id),
                "fire_at": rfc3339(fire.fire_at),
                "catch_up": fire.catch_up,
            },
        )


async def next_due(sessionmaker: async_sessionmaker[AsyncSession]) -> datetime | None:
    """The earliest ``next_fire_at`` of an enabled schedule."""
    async with sessionmaker() as session:
        value: datetime | None = (
            await session.execute(select(func.min(Schedule.next_fire_at)).where(Schedule.enabled))
        ).scalar_one()
        return value


@dataclass(frozen=True)
class PreviewRow:
    """One upcoming fire: local time (ISO, with offset and zone abbreviation) and UTC."""

    local: str
    zone: str
    utc: str


def preview(config: dict[str, Any], now: datetime, count: int = 10) -> list[PreviewRow]:
    """The next ``count`` fire times of a (draft) schedule config; raises ScheduleError.

    Interval schedules are counted from ``now`` (as when published now).
    """
    spec = parse_spec(config)
    return [
        PreviewRow(
            local=t.astimezone(spec.tz).strftime("%a %Y-%m-%d %H:%M:%S %z"),
            zone=t.astimezone(spec.tz).tzname() or spec.tz.key,
            utc=t.strftime("%Y-%m-%d %H:%M:%S UTC"),
        )
        for t in upcoming(spec, now, now, count)
    ]
