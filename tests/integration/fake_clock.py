"""A settable clock for schedule tests, and moving stored schedules onto it."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import text

from backend.runtime import Runtime


class FakeClock:
    """A settable UTC clock (the engine's Clock port)."""

    def __init__(self, now: datetime) -> None:
        self.current = now

    def now(self) -> datetime:
        return self.current

    def advance(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)


async def resync(runtime: Runtime, clock: FakeClock) -> None:
    """Move every schedule's anchor and next fire to the fake clock's now."""
    from backend.services.triggers import schedules
    from backend.triggers.schedule_rules import next_fire

    async with runtime.sessionmaker() as session, session.begin():
        for row in (await session.execute(text("select id, definition from schedules"))).all():
            spec = schedules.spec_of(row.definition)
            await session.execute(
                text("update schedules set anchor_at = :a, next_fire_at = :n where id = :id"),
                {"a": clock.now(), "n": next_fire(spec, clock.now(), clock.now()), "id": row.id},
            )
