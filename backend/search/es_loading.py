"""Reading what the Elasticsearch documents are built from: runs (with their step ids) and
workflows (with their owner's e-mail and node types), by id, in one query each."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import AuditLog, Run, StepRun, User, Workflow
from backend.search.pg_workflows import NODE_TYPES

RUN_COLUMNS = (
    Run.id,
    Run.workflow_id,
    Run.status,
    Run.trigger,
    Run.version_number,
    Run.input,
    Run.output,
    Run.error,
    Run.created_at,
    Run.started_at,
    Run.finished_at,
)


def _ids(values: Sequence[str]) -> list[uuid.UUID]:
    out = []
    for v in values:
        try:
            out.append(uuid.UUID(v))
        except ValueError:
            continue
    return out


def _steps() -> Any:
    return (
        select(func.array_agg(StepRun.step_id))
        .where(StepRun.run_id == Run.id)
        .scalar_subquery()
        .label("steps")
    )


async def load_runs(session: AsyncSession, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The runs of ``run_ids`` that exist, as column dicts with ``steps``, by id."""
    rows = await session.execute(select(*RUN_COLUMNS, _steps()).where(Run.id.in_(_ids(run_ids))))
    return {str(r.id): dict(r._mapping) for r in rows}


async def runs_after(
    session: AsyncSession, after: uuid.UUID | None, limit: int
) -> list[dict[str, Any]]:
    """Up to ``limit`` runs with ids above ``after``, by id (for re-indexing)."""
    query = select(*RUN_COLUMNS, _steps()).order_by(Run.id).limit(limit)
    if after is not None:
        query = query.where(Run.id > after)
    return [dict(r._mapping) for r in await session.execute(query)]


async def load_workflows(
    session: AsyncSession, workflow_ids: Sequence[str] | None = None
) -> dict[str, dict[str, Any]]:
    """The workflows of ``workflow_ids`` (every workflow when None) as dicts with
    ``owner`` (e-mail), ``node_types`` (of the draft) and ``archived`` (bool), by id."""
    query = select(
        Workflow.id,
        Workflow.name,
        Workflow.description,
        Workflow.tags,
        Workflow.active_version,
        Workflow.updated_at,
        User.email.label("owner"),
        NODE_TYPES.label("node_types"),
        Workflow.archived_at.is_not(None).label("archived"),
    ).outerjoin(User, User.id == Workflow.owner_id)
    if workflow_ids is not None:
        query = query.where(Workflow.id.in_(_ids(workflow_ids)))
    return {str(r.id): dict(r._mapping) for r in await session.execute(query)}


async def audit_rows(session: AsyncSession, batch: int) -> AsyncIterator[list[dict[str, Any]]]:
    """Every audit log row as column dicts, ``batch`` at a time, by id."""
    last = 0
    while True:
        rows = list(
            (
                await session.execute(
                    select(AuditLog).where(AuditLog.id > last).order_by(AuditLog.id).limit(batch)
                )
            ).scalars()
        )
        if not rows:
            return
        yield [{c.key: getattr(r, c.key) for c in AuditLog.__table__.columns} for r in rows]
        last = rows[-1].id
