"""What the retention passes did, as the dashboard shows it (the passes themselves:
backend/services/operations/retention.py)."""

from __future__ import annotations

from datetime import datetime

import msgspec
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import RetentionPass


class RecentPass(msgspec.Struct):
    """One recorded class pass, as the dashboard shows it."""

    data_class: str
    finished_at: datetime
    deleted: int
    batches: int
    cutoff: datetime | None
    max_rows: int | None
    error: str | None


async def recent_passes(session: AsyncSession, *, limit: int = 20) -> list[RecentPass]:
    """The latest ``limit`` class passes, newest first."""
    rows = (
        await session.execute(select(RetentionPass).order_by(RetentionPass.id.desc()).limit(limit))
    ).scalars()
    return [
        RecentPass(r.data_class, r.finished_at, r.deleted, r.batches, r.cutoff, r.max_rows, r.error)
        for r in rows
    ]


async def removed_since(session: AsyncSession, since: datetime) -> dict[str, int]:
    """Rows removed per class by the passes that finished after ``since``."""
    rows = await session.execute(
        select(RetentionPass.data_class, func.sum(RetentionPass.deleted))
        .where(RetentionPass.finished_at >= since)
        .group_by(RetentionPass.data_class)
    )
    return {name: int(total or 0) for name, total in rows.all()}
