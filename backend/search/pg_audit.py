"""Searching the audit log in PostgreSQL, through the GIN index on
``audit_search_vector(...)`` (action, object, actor, details, before, after; migration
0020_search). Only callers holding ``audit:read`` reach it (:class:`Visibility`).

Fields (docs/search.md): ``action`` (``workflow`` matches every ``workflow.*`` action,
``workflow.update`` only that one), ``actor`` (e-mail or label, user id, or ``system``),
``object`` (an object type like ``run`` or an object id); facets: action, object, actor.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from sqlalchemy import ColumnElement, false, func, literal, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import AuditLog
from backend.search.criteria import Criteria, Filter
from backend.search.model import COUNT_LIMIT, Hit, SearchResult, Visibility
from backend.search.pg_common import (
    Keyset,
    combined_query,
    count_of,
    counted_page,
    fetch_page,
    negate,
    text_conditions,
    time_window,
    unindexed,
    uuids,
)

AUDIT_VECTOR = func.audit_search_vector(
    AuditLog.action,
    AuditLog.object_type,
    AuditLog.object_id,
    AuditLog.actor_label,
    AuditLog.details,
    AuditLog.before,
    AuditLog.after,
)
KEYSETS = {
    "newest": Keyset("newest", (AuditLog.at, AuditLog.id), True, ("time", "int")),
    "oldest": Keyset("oldest", (AuditLog.at, AuditLog.id), False, ("time", "int")),
}
FACETS = ("action", "object", "actor")


def _filter(f: Filter) -> ColumnElement[bool]:
    values = [str(v) for v in f.values]
    if f.field == "action":
        conds = []
        for v in values:
            v = v.rstrip(".")
            conds += [AuditLog.action == v, AuditLog.action.startswith(v + ".", autoescape=True)]
        return negate(or_(*conds), f.negated)
    if f.field == "actor":
        conds = [func.lower(AuditLog.actor_label).in_([v.lower() for v in values])]
        ids = uuids(values)
        if ids:
            conds.append(AuditLog.actor_user_id.in_(ids))
        if "system" in (v.lower() for v in values):
            conds.append(AuditLog.actor_user_id.is_(None) & AuditLog.actor_label.is_(None))
        return negate(or_(*conds), f.negated)
    if f.field == "object":
        lowered = [v.lower() for v in values]
        cond = or_(AuditLog.object_type.in_(lowered), AuditLog.object_id.in_(values))
        return negate(cond, f.negated)
    raise ValueError(f"the audit log cannot be filtered by {f.field}")


def conditions(criteria: Criteria, visible: Visibility) -> list[ColumnElement[bool]]:
    """The WHERE conditions of an audit search (nothing without ``audit:read``)."""
    if not visible.audit:
        return [false()]
    conds = text_conditions(criteria, AUDIT_VECTOR)
    conds += time_window(criteria, AuditLog.at)
    conds += [_filter(f) for f in criteria.filters]
    return conds


async def search_audit(
    session: AsyncSession,
    criteria: Criteria,
    visible: Visibility,
    *,
    query: str,
    limit: int,
    cursor: str | None,
) -> SearchResult:
    """One page of audit entries matching ``criteria``, with facets."""
    conds = conditions(criteria, visible)
    q = combined_query(criteria)
    columns = (
        AuditLog.id,
        AuditLog.at,
        AuditLog.action,
        AuditLog.object_type,
        AuditLog.object_id,
        AuditLog.actor_label,
        AuditLog.details,
    )
    page = select(*columns).where(*conds)
    relevance = criteria.sort == "relevance" and q is not None
    rows, next_cursor = await fetch_page(
        session,
        page,
        keyset=KEYSETS.get(criteria.sort, KEYSETS["newest"]),
        key_of=lambda r: [r[1], r[0]],
        rank=func.ts_rank(AUDIT_VECTOR, q) if relevance else None,
        tiebreak=AuditLog.id,
        cursor=cursor,
        limit=limit,
        by_index=q is None,
    )
    m = (
        select(AuditLog.action, AuditLog.object_type, AuditLog.actor_label)
        .where(*conds)
        .order_by((AuditLog.at if q is None else unindexed(AuditLog.at)).desc())
        .limit(COUNT_LIMIT + 1)
        .cte("m")
    )
    actor = func.coalesce(m.c.actor_label, "system")
    parts = [
        count_of(m),
        select(literal("action"), m.c.action, func.count()).group_by(m.c.action),
        select(literal("object"), m.c.object_type, func.count()).group_by(m.c.object_type),
        select(literal("actor"), actor, func.count()).group_by(actor),
    ]
    return await counted_page(
        session,
        parts,
        FACETS,
        scope="audit",
        query=query,
        sort=criteria.sort if relevance or criteria.sort != "relevance" else "newest",
        hits=[_hit(r) for r in rows],
        next_cursor=next_cursor,
    )


def _hit(r: Any) -> Hit:
    entry_id, at, action, object_type, object_id, actor, details = r
    link = urlencode({"object_type": object_type, "object_id": object_id})
    return Hit(
        kind="audit",
        id=str(entry_id),
        title=f"{action} {object_type} {object_id}",
        url=f"/admin/audit?{link}",
        at=at,
        status=None,
        snippet=", ".join(f"{k}: {v}" for k, v in list((details or {}).items())[:4])[:200],
        detail={
            "action": action,
            "object_type": object_type,
            "object_id": object_id,
            "actor": actor or "system",
        },
    )
