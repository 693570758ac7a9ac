"""Workflows a user may call: the designer's workflow pickers (Sub-workflow, For each).

A picker offers the workflows the user may **run** (``workflow:run``, the permission a call
needs at save, publish and run time; :mod:`backend.services.identity.references`), not archived,
matching a search text, by name. Names of workflows a config already names are shown only
to users who may read them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.auth.policy import Level, Principal
from backend.db.models import Workflow
from backend.services.identity import access

MAX_OPTIONS = 50
"""At most this many workflows per search (the user narrows with the search text)."""


@dataclass(frozen=True)
class WorkflowOption:
    """One workflow a picker offers: id, name, description and its active version
    (``None``: never published, so a call would fail until it is)."""

    id: str
    name: str
    description: str
    active_version: int | None


def _like_pattern(text: str) -> str:
    """``text`` as a case-insensitive substring pattern, LIKE wildcards escaped."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


async def runnable_workflows(
    session: AsyncSession,
    principal: Principal,
    query: str = "",
    *,
    exclude: uuid.UUID | None = None,
    limit: int = MAX_OPTIONS,
) -> list[WorkflowOption]:
    """Workflows ``principal`` may run whose name or description contains ``query``
    (case-insensitive; empty: all), not archived, without ``exclude`` (the workflow being
    edited: a workflow calling itself would recurse), by name, at most ``limit``."""
    visible = await access.workflow_filter(session, principal, Level.RUN)
    stmt = select(Workflow).where(visible, Workflow.archived_at.is_(None))
    text = query.strip()
    if text:
        pattern = _like_pattern(text)
        stmt = stmt.where(
            Workflow.name.ilike(pattern, escape="\\")
            | Workflow.description.ilike(pattern, escape="\\")
        )
    if exclude is not None:
        stmt = stmt.where(Workflow.id != exclude)
    stmt = stmt.order_by(func.lower(Workflow.name), Workflow.id).limit(max(1, min(limit, 200)))
    rows = (await session.execute(stmt)).scalars()
    return [
        WorkflowOption(str(wf.id), wf.name, wf.description or "", wf.active_version) for wf in rows
    ]


async def readable_names(
    session: AsyncSession, principal: Principal, ids: Iterable[str]
) -> dict[str, str]:
    """``{id: name}`` of the workflows among ``ids`` that ``principal`` may read (archived
    ones are marked ``"(archived)"``); unknown, unreadable and malformed ids are left out."""
    wanted: set[uuid.UUID] = set()
    for raw in ids:
        try:
            wanted.add(uuid.UUID(str(raw)))
        except ValueError:
            continue
    if not wanted:
        return {}
    visible = await access.workflow_filter(session, principal, Level.READ)
    rows = await session.execute(
        select(Workflow.id, Workflow.name, Workflow.archived_at).where(
            Workflow.id.in_(wanted), visible
        )
    )
    return {str(wid): f"{name} (archived)" if archived else name for wid, name, archived in rows}


async def ids_at_level(
    session: AsyncSession, principal: Principal, minimum: Level, ids: Iterable[uuid.UUID]
) -> set[uuid.UUID]:
    """The workflows among ``ids`` that ``principal`` holds at ``minimum`` or above (one
    query; for showing each row's buttons in a list)."""
    wanted = list(ids)
    if not wanted:
        return set()
    visible = await access.workflow_filter(session, principal, minimum)
    rows = await session.execute(select(Workflow.id).where(Workflow.id.in_(wanted), visible))
    return set(rows.scalars())
