"""The child runs of a run (Sub-workflow, For-each), a page at a time.

A For-each over 10,000 items has 10,000 children: the run detail (API and page) lists the
first :data:`CHILD_PAGE` of each calling step with the step's count, and
:func:`child_page` serves the rest with keyset pagination on ``(parent step, item
index)`` (the index ``ix_runs_parent_run_id`` finds the parent's children; the cursor is
the last row's step and index, base64url JSON, opaque to callers).
"""

from __future__ import annotations

import uuid
from typing import Protocol

import msgspec
from sqlalchemy import func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Run
from backend.services import paging
from backend.services.errors import InvalidInput
from backend.services.runs.execution import RunNotFound

CHILD_PAGE = 50
"""Children shown per calling step in a run detail, and the default page size."""
MAX_CHILD_PAGE = 500
"""The largest page :func:`child_page` serves."""


class ChildLink(msgspec.Struct):
    """A child run started by a Sub-workflow / For-each step (``index``: the item)."""

    run_id: str
    step_id: str
    index: int
    status: str


class ChildPage(msgspec.Struct):
    """One page of a run's children in ``(step, index)`` order: ``total`` children of the
    run (of ``step_id`` when the request named one), ``next_cursor`` to pass as
    ``cursor`` for the next page (``None`` on the last)."""

    children: list[ChildLink]
    total: int
    next_cursor: str | None


class WithChildren(Protocol):
    """What :func:`page_in_detail` needs of a run detail (backend.services.runs.runs)."""

    id: str
    children: list[ChildLink]
    children_count: dict[str, int]


def _cursor(link: ChildLink) -> str:
    return paging.encode_cursor([link.step_id, link.index], "children")


def _position(cursor: str) -> tuple[str, int]:
    """``(step id, index)`` of ``cursor``; raises ``BadCursor`` (400 naming ``cursor``)
    for one this module did not make."""
    step_id, index = paging.decode_cursor(cursor, tuple[str, int], "children")
    return step_id, index


async def child_page(
    session: AsyncSession,
    run_id: uuid.UUID,
    *,
    step_id: str | None = None,
    cursor: str | None = None,
    limit: int = CHILD_PAGE,
) -> ChildPage:
    """The children of ``run_id`` (of its step ``step_id`` when given) after ``cursor``,
    at most ``limit`` (1..:data:`MAX_CHILD_PAGE`). Raises :class:`InvalidInput` naming
    ``limit`` or ``cursor`` when either is malformed, :class:`RunNotFound` when the run
    does not exist."""
    if await session.get(Run, run_id) is None:
        raise RunNotFound(f"run {run_id} not found")
    if not 1 <= limit <= MAX_CHILD_PAGE:
        raise InvalidInput(f"limit must be 1..{MAX_CHILD_PAGE}, got {limit}", "limit")
    where = [Run.parent_run_id == run_id]
    if step_id is not None:
        where.append(Run.parent_step_id == step_id)
    total = (await session.execute(select(func.count()).where(*where))).scalar_one()
    if cursor:
        after = _position(cursor)
        where.append(tuple_(Run.parent_step_id, Run.parent_index) > after)
    rows = await session.execute(
        select(Run.id, Run.parent_step_id, Run.parent_index, Run.status)
        .where(*where)
        .order_by(Run.parent_step_id, Run.parent_index)
        .limit(limit + 1)
    )
    links = [ChildLink(str(cid), str(sid), int(i or 0), status) for cid, sid, i, status in rows]
    more = len(links) > limit
    links = links[:limit]
    return ChildPage(links, int(total), _cursor(links[-1]) if more else None)


async def first_pages(
    session: AsyncSession, run_id: uuid.UUID
) -> tuple[list[ChildLink], dict[str, int]]:
    """The first :data:`CHILD_PAGE` children of each calling step of ``run_id`` and the
    number of children per step (one statement each, however many children)."""
    ranked = (
        select(
            Run.id,
            Run.parent_step_id,
            Run.parent_index,
            Run.status,
            func.row_number()
            .over(partition_by=Run.parent_step_id, order_by=Run.parent_index)
            .label("n"),
        )
        .where(Run.parent_run_id == run_id)
        .subquery()
    )
    rows = await session.execute(
        select(ranked.c.id, ranked.c.parent_step_id, ranked.c.parent_index, ranked.c.status)
        .where(ranked.c.n <= CHILD_PAGE)
        .order_by(ranked.c.parent_step_id, ranked.c.parent_index)
    )
    links = [ChildLink(str(cid), str(sid), int(i or 0), status) for cid, sid, i, status in rows]
    counts = {
        str(sid): int(n)
        for sid, n in await session.execute(
            select(Run.parent_step_id, func.count())
            .where(Run.parent_run_id == run_id)
            .group_by(Run.parent_step_id)
        )
    }
    return links, counts


async def page_in_detail(
    session: AsyncSession, detail: WithChildren, step_id: str | None, cursor: str | None
) -> dict[str, str]:
    """For the run page: with ``step_id`` and ``cursor``, put the page of that step's
    children after ``cursor`` in ``detail.children`` instead of its first page. Returns,
    per calling step with children after the ones shown, the cursor of its next page.
    Raises :class:`InvalidInput` for a malformed cursor."""
    more: dict[str, str] = {}
    if step_id and cursor:
        page = await child_page(session, uuid.UUID(detail.id), step_id=step_id, cursor=cursor)
        detail.children = [c for c in detail.children if c.step_id != step_id] + page.children
        if page.next_cursor:
            more[step_id] = page.next_cursor
    for sid, count in detail.children_count.items():
        shown = [c for c in detail.children if c.step_id == sid]
        if sid not in more and sid != step_id and shown and count > len(shown):
            more[sid] = _cursor(shown[-1])
    return more
