"""The operations dashboard's figures, read from PostgreSQL (the truth) and Redis.

Over a window of the last ``minutes`` (15 minutes to 7 days): runs ended per minute by
outcome, the success rate, p50/p95/p99 run duration (``percentile_cont``, start to end,
seconds), the slowest workflows by p95, the workflows with the most failed runs, the
installation's queue and workers (:mod:`backend.services.operations.metrics_view`), the scheduler
that leads (:mod:`backend.services.operations.leadership`), and what retention
removed (:mod:`backend.services.operations.retention`). Queries use the ``runs.finished_at`` index,
so
their cost follows the window's runs, not the table.

The dashboard is installation-wide (every workflow), so it needs ``metrics:read``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.services.operations import leadership, retention_report
from backend.services.operations.metrics_view import Installation, installation

WINDOWS = (15, 60, 360, 1440, 10080)
"""The windows offered, in minutes (15 min, 1 h, 6 h, 24 h, 7 days)."""
FAILED = ("failed", "timed_out")
"""Outcomes counted as failures (cancelled runs are neither success nor failure)."""
TOP = 5


@dataclass
class Bucket:
    """Runs that ended in one time bucket (``start`` is its first instant, UTC)."""

    start: datetime
    succeeded: int = 0
    failed: int = 0
    other: int = 0

    @property
    def total(self) -> int:
        """All runs that ended in the bucket."""
        return self.succeeded + self.failed + self.other


@dataclass
class WorkflowFigure:
    """One workflow's figures over the window: ``runs`` ended, ``failed`` of them,
    ``p95`` duration in seconds."""

    workflow_id: uuid.UUID
    name: str
    runs: int
    failed: int
    p95: float | None

    @property
    def failure_rate(self) -> float:
        """Failed / ended, 0..1."""
        return self.failed / self.runs if self.runs else 0.0


@dataclass
class Dashboard:
    """Everything the dashboard shows; durations in seconds, ``bucket_minutes`` the width
    of each bucket of ``per_bucket``."""

    minutes: int
    since: datetime
    bucket_minutes: int
    per_bucket: list[Bucket]
    ended: int
    succeeded: int
    failed: int
    percentiles: dict[str, float | None]
    slowest: list[WorkflowFigure]
    most_failing: list[WorkflowFigure]
    now: Installation
    retention: list[retention_report.RecentPass] = field(default_factory=list)
    removed: dict[str, int] = field(default_factory=dict)
    leader: tuple[str, datetime | None] | None = None
    """The leading scheduler ``(name, connected at)``, None when none leads."""

    @property
    def success_rate(self) -> float | None:
        """Succeeded / (succeeded + failed), None when neither happened."""
        decided = self.succeeded + self.failed
        return self.succeeded / decided if decided else None


def bucket_minutes(minutes: int) -> int:
    """Bucket width for a window: about 60 buckets (1 minute for the last hour)."""
    return max(1, minutes // 60)


def parse_window(value: str | None) -> int:
    """The window in minutes from a query value (one of :data:`WINDOWS`; default 60)."""
    try:
        minutes = int(value or 60)
    except ValueError:
        return 60
    return minutes if minutes in WINDOWS else 60


_BUCKETS = text(
    """
    select to_timestamp(floor(extract(epoch from finished_at) / :w) * :w) as b,
           count(*) filter (where status = 'succeeded'),
           count(*) filter (where status in ('failed', 'timed_out')),
           count(*) filter (where status not in ('succeeded', 'failed', 'timed_out'))
    from runs where finished_at >= :since
    group by b order by b
    """
)
_PERCENTILES = text(
    """
    select percentile_cont(array[0.5, 0.95, 0.99]) within group (
             order by extract(epoch from finished_at - coalesce(started_at, created_at)))
    from runs where finished_at >= :since
    """
)
_PER_WORKFLOW = text(
    """
    select r.workflow_id, w.name, count(*) as runs,
           count(*) filter (where r.status in ('failed', 'timed_out')) as failed,
           percentile_cont(0.95) within group (
             order by extract(epoch from r.finished_at - coalesce(r.started_at, r.created_at)))
    from runs r join workflows w on w.id = r.workflow_id
    where r.finished_at >= :since
    group by r.workflow_id, w.name
    """
)


async def load(
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: Redis,
    *,
    minutes: int = 60,
    now: datetime | None = None,
) -> Dashboard:
    """Read the dashboard for the last ``minutes`` (see the module docstring)."""
    now = now or datetime.now(UTC)
    since = now - timedelta(minutes=minutes)
    width = bucket_minutes(minutes)
    async with sessionmaker() as session:
        params = {"since": since, "w": width * 60}
        rows = (await session.execute(_BUCKETS, params)).all()
        pct = (await session.execute(_PERCENTILES, params)).scalar()
        per_workflow = (await session.execute(_PER_WORKFLOW, params)).all()
        passes = await retention_report.recent_passes(session, limit=14)
        removed = await retention_report.removed_since(session, now - timedelta(days=1))
        leader = await leadership.scheduler_leader(session)
    found = {row[0]: Bucket(row[0], int(row[1]), int(row[2]), int(row[3])) for row in rows}
    buckets = []
    start = datetime.fromtimestamp((since.timestamp() // (width * 60)) * width * 60, tz=UTC)
    while start <= now:
        buckets.append(found.get(start, Bucket(start)))
        start += timedelta(minutes=width)
    figures = [
        WorkflowFigure(r[0], r[1], int(r[2]), int(r[3]), float(r[4]) if r[4] is not None else None)
        for r in per_workflow
    ]
    slowest = sorted(
        (f for f in figures if f.p95 is not None), key=lambda f: f.p95 or 0, reverse=True
    )[:TOP]
    failing = sorted(
        (f for f in figures if f.failed), key=lambda f: (f.failed, f.failure_rate), reverse=True
    )[:TOP]
    values = list(pct) if pct else [None, None, None]
    return Dashboard(
        minutes=minutes,
        since=since,
        bucket_minutes=width,
        per_bucket=buckets,
        ended=sum(b.total for b in found.values()),
        succeeded=sum(b.succeeded for b in found.values()),
        failed=sum(b.failed for b in found.values()),
        percentiles={"p50": values[0], "p95": values[1], "p99": values[2]},
        slowest=slowest,
        most_failing=failing,
        now=await installation(sessionmaker, redis),
        retention=passes,
        removed=removed,
        leader=leader,
    )
