"""Searching workflows in PostgreSQL: names (weight A), descriptions (B) and tags by full
text, names also by trigram similarity (pg_trgm, so ``ordr intake`` finds "Order intake")
and substring; node types from the draft diagram.

Fields (docs/search.md): ``tag``, ``type`` (a node type in the draft, e.g.
``slack.post_message``), ``owner`` (e-mail), ``published`` (yes/no); facets: tag, type.
Without pg_trgm (``trigram=False``) names match by substring only.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    ColumnElement,
    Text,
    and_,
    cast,
    func,
    literal,
    literal_column,
    or_,
    select,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import User, Workflow
from backend.search.criteria import Criteria, Filter
from backend.search.model import COUNT_LIMIT, Hit, SearchResult, Visibility
from backend.search.pg_common import (
    TS_CONFIG,
    Keyset,
    combined_query,
    count_of,
    counted_page,
    fetch_page,
    negate,
    text_conditions,
    time_window,
    visible_condition,
)
from backend.search.query import TextTerm

_CFG: ColumnElement[Any] = literal_column(f"'{TS_CONFIG}'::regconfig")
WORKFLOW_VECTOR = (
    func.setweight(func.to_tsvector(_CFG, Workflow.name), literal_column("'A'"))
    .op("||")(func.setweight(func.to_tsvector(_CFG, Workflow.description), literal_column("'B'")))
    .op("||")(func.to_tsvector(_CFG, func.array_to_string(Workflow.tags, " ")))
)
NODE_TYPES = func.jsonb_path_query_array(
    Workflow.draft, literal_column("'$.nodes[*].type'::jsonpath")
)
KEYSETS = {
    "name": Keyset("name", (func.lower(Workflow.name), Workflow.id), False, ("str", "uuid")),
    "newest": Keyset("newest", (Workflow.updated_at, Workflow.id), True, ("time", "uuid")),
    "oldest": Keyset("oldest", (Workflow.updated_at, Workflow.id), False, ("time", "uuid")),
}
FACETS = ("tag", "type")
SIMILARITY = 0.3  # pg_trgm's default similarity threshold


def _like(value: str) -> str:
    return "%" + value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _name_like(term: TextTerm) -> ColumnElement[bool]:
    return func.lower(Workflow.name).like(_like(term.text.lower()), escape="\\")


def _words(criteria: Criteria) -> str:
    return " ".join(t.text for t in criteria.text if not t.negated).lower()


def _filter(f: Filter) -> ColumnElement[bool]:
    values = [str(v) for v in f.values]
    if f.field == "tag":
        return negate(Workflow.tags.overlap(cast(values, ARRAY(Text))), f.negated)
    if f.field == "type":
        conds = [Workflow.draft["nodes"].contains(cast([{"type": v}], JSONB)) for v in values]
        return negate(or_(*conds), f.negated)
    if f.field == "owner":
        owners = select(User.id).where(func.lower(User.email).in_([v.lower() for v in values]))
        return negate(Workflow.owner_id.in_(owners), f.negated)
    if f.field == "published":
        cond = or_(
            *[
                Workflow.active_version.is_not(None)
                if v == "yes"
                else Workflow.active_version.is_(None)
                for v in values
            ]
        )
        return negate(cond, f.negated)
    raise ValueError(f"workflows cannot be filtered by {f.field}")


def conditions(
    criteria: Criteria, visible: Visibility, *, trigram: bool
) -> list[ColumnElement[bool]]:
    """The WHERE conditions of a workflow search (archived workflows are left out, as on
    the workflow list; their runs stay searchable)."""
    conds = [visible_condition(Workflow.id, visible.workflow_ids), Workflow.archived_at.is_(None)]
    terms = text_conditions(criteria, WORKFLOW_VECTOR, _name_like)
    if trigram and criteria.has_text:
        # every term matches, or the name as a whole is close to the words typed
        fuzzy = func.similarity(func.lower(Workflow.name), _words(criteria)) >= SIMILARITY
        positive = [c for c, t in zip(terms, criteria.text, strict=True) if not t.negated]
        negative = [c for c, t in zip(terms, criteria.text, strict=True) if t.negated]
        terms = [or_(and_(*positive), fuzzy), *negative]
    conds += terms
    conds += time_window(criteria, Workflow.updated_at)
    conds += [_filter(f) for f in criteria.filters]
    return conds


async def search_workflows(
    session: AsyncSession,
    criteria: Criteria,
    visible: Visibility,
    *,
    query: str,
    limit: int,
    cursor: str | None,
    trigram: bool,
) -> SearchResult:
    """One page of workflows matching ``criteria`` among ``visible`` ones, with facets.

    Relevance: full-text rank plus name similarity (pg_trgm); without free text, by name.
    """
    conds = conditions(criteria, visible, trigram=trigram)
    q = combined_query(criteria)
    sort = criteria.sort if (criteria.sort != "relevance" or criteria.text) else "name"
    columns = (
        Workflow.id,
        Workflow.name,
        Workflow.description,
        Workflow.tags,
        Workflow.active_version,
        Workflow.updated_at,
        User.email,
        NODE_TYPES,
        func.lower(Workflow.name),
    )
    page = select(*columns).outerjoin(User, User.id == Workflow.owner_id).where(*conds)
    rank: Any = None
    if sort == "relevance":
        rank = func.ts_rank(WORKFLOW_VECTOR, q) if q is not None else literal(0.0)
        if trigram:
            rank = rank + func.similarity(func.lower(Workflow.name), _words(criteria))
    keyset = KEYSETS.get(sort, KEYSETS["name"])
    rows, next_cursor = await fetch_page(
        session,
        page,
        keyset=keyset,
        key_of=lambda r: [r[8], r[0]] if keyset.name == "name" else [r[5], r[0]],
        rank=rank,
        tiebreak=Workflow.id,
        cursor=cursor,
        limit=limit,
    )
    matches = select(Workflow.id, Workflow.tags, NODE_TYPES.label("types")).where(*conds)
    m = matches.limit(COUNT_LIMIT + 1).cte("m")
    tags = select(func.unnest(m.c.tags).label("v")).select_from(m).subquery()
    types = (
        select(m.c.id, func.jsonb_array_elements_text(m.c.types).label("v"))
        .select_from(m)
        .distinct()
        .subquery()
    )
    parts = [
        count_of(m),
        select(literal("tag"), tags.c.v, func.count()).group_by(tags.c.v),
        select(literal("type"), types.c.v, func.count()).group_by(types.c.v),
    ]
    return await counted_page(
        session,
        parts,
        FACETS,
        scope="workflows",
        query=query,
        sort=sort,
        hits=[_hit(r) for r in rows],
        next_cursor=next_cursor,
    )


def _hit(r: Any) -> Hit:
    wid, name, description, tags, active, updated, owner, types, _ = r
    return Hit(
        kind="workflow",
        id=str(wid),
        title=name,
        url=f"/workflows/{wid}/designer",
        at=updated,
        status="published" if active is not None else "draft",
        snippet=(description or "")[:200],
        detail={
            "tags": list(tags or []),
            "active_version": active,
            "owner": owner,
            "node_types": sorted(set(types or [])),
        },
    )
