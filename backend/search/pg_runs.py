"""Searching runs in PostgreSQL: the ``runs`` table itself, through the GIN index on
``(runs.workflow_id, runs.search_vector)`` (``run_search_vector(input, output, error)``,
kept by a trigger; migrations 0020_search and 0022_run_search_by_workflow) and the covering
btree indexes for keyset pages and facets (0020_search), so a run is searchable the moment
its transaction commits. Filters on workflows (permissions, ``workflow:``, ``tag:``) are
conditions on ``runs.workflow_id``, never joins, so they reach those indexes.

Fields (docs/search.md): ``status``, ``workflow`` (name, case-insensitive, or id), ``tag``
(the workflow's tags), ``trigger``, ``version``, ``step`` (a step id of the run), ``error``
(text inside the run's error), ``id``; facets: status, workflow, trigger, tag.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import quote

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    String,
    Text,
    any_,
    cast,
    exists,
    func,
    literal,
    literal_column,
    or_,
    select,
    tuple_,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Run, StepRun, Workflow
from backend.search.criteria import Criteria, Filter
from backend.search.model import (
    COUNT_LIMIT,
    Facet,
    Hit,
    SearchResult,
    Visibility,
)
from backend.search.pg_common import (
    TS_CONFIG,
    Keyset,
    capped,
    combined_query,
    facets_from_rows,
    fetch_page,
    negate,
    one_of,
    page_result,
    text_conditions,
    time_window,
    uuids,
    visible_condition,
)

RUN_VECTOR = Run.search_vector
DURATION_MS = func.coalesce(
    cast(func.floor(func.extract("epoch", Run.finished_at - Run.started_at) * 1000), BigInteger),
    -1,
)
KEYSETS = {
    "newest": Keyset("newest", (Run.created_at, Run.id), True, ("time", "uuid")),
    "oldest": Keyset("oldest", (Run.created_at, Run.id), False, ("time", "uuid")),
    "duration": Keyset("duration", (DURATION_MS, Run.id), True, ("int", "uuid")),
}
FACETS = ("status", "workflow", "trigger", "tag")


def _filter(f: Filter) -> ColumnElement[bool]:
    values: list[Any] = list(f.values)
    if f.field == "status":
        return one_of(Run.status, values, f.negated)
    if f.field == "trigger":
        return one_of(Run.trigger, values, f.negated)
    if f.field == "version":
        return one_of(Run.version_number, values, f.negated)
    if f.field == "id":
        return one_of(Run.id, uuids(values), f.negated)
    if f.field == "tag":
        return negate(_of_workflows(Workflow.tags.overlap(cast(values, ARRAY(Text)))), f.negated)
    if f.field == "workflow":
        by_name = func.lower(Workflow.name).in_([str(v).lower() for v in values])
        ids = uuids(values)
        return negate(
            _of_workflows(or_(by_name, Workflow.id.in_(ids)) if ids else by_name), f.negated
        )
    if f.field == "step":
        has = exists().where(StepRun.run_id == Run.id, StepRun.step_id.in_(values))
        return negate(has, f.negated)
    if f.field == "error":
        text = cast(Run.error, Text)
        cond = or_(*[text.ilike("%" + _escape_like(str(v)) + "%", escape="\\") for v in values])
        return negate(Run.error.is_not(None) & cond, f.negated)
    raise ValueError(f"runs cannot be filtered by {f.field}")


def _of_workflows(cond: ColumnElement[bool]) -> ColumnElement[bool]:
    """Runs of the workflows matching ``cond``: ``workflow_id = ANY(ARRAY(SELECT id FROM
    workflows WHERE cond))``. The workflow ids are found first (an InitPlan over the small
    workflows table), so the condition reaches the run indexes: the GIN index over
    ``(workflow_id, search_vector)`` intersects them with the text (migration
    0022_run_search_by_workflow), the time indexes filter on their included workflow_id."""
    ids = select(Workflow.id).where(cond).scalar_subquery()
    return Run.workflow_id == any_(func.array(ids, type_=ARRAY(UUID)))


def _escape_like(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def conditions(criteria: Criteria, visible: Visibility) -> list[ColumnElement[bool]]:
    """The WHERE conditions of a run search (over ``runs``)."""
    conds = [visible_condition(Run.workflow_id, visible.workflow_ids)]
    conds += text_conditions(criteria, RUN_VECTOR)
    conds += time_window(criteria, Run.created_at)
    conds += [_filter(f) for f in criteria.filters]
    return conds


def run_url(run_id: str, query: str) -> str:
    """The run page, carrying the search it was found by (its "Back to results" link)."""
    return f"/runs/{run_id}" + (f"?search={quote(query, safe='')}" if query else "")


async def _workflows(session: AsyncSession, ids: set[str]) -> dict[str, tuple[str, list[str]]]:
    rows = await session.execute(
        select(Workflow.id, Workflow.name, Workflow.tags).where(Workflow.id.in_(uuids(sorted(ids))))
    )
    return {str(i): (name, list(tags or [])) for i, name, tags in rows}


async def _facets(
    session: AsyncSession,
    criteria: Criteria,
    conds: list[ColumnElement[bool]],
    first_page: tuple[Keyset, int] | None = None,
) -> tuple[int, bool, list[Facet], dict[str, tuple[str, list[str]]], list[Any]]:
    """Counts over the first :data:`COUNT_LIMIT` + 1 matches (newest first, or in the
    ``first_page`` keyset's order) in one pass (GROUPING SETS); the tag facet sums the
    per-workflow counts over each workflow's tags. With ``first_page`` (keyset, size) the
    same scan also yields the ids of the first page (one pass over the matches instead of
    two); they are returned in order (empty otherwise)."""
    by_index = not criteria.has_text
    keyset = first_page[0] if first_page else KEYSETS["newest"]
    m = (
        select(Run.id, Run.created_at, Run.status, Run.trigger, Run.workflow_id)
        .where(*conds)
        .order_by(*keyset.order_by(by_index=by_index))
        .limit(COUNT_LIMIT + 1)
        .cte("m")
        .prefix_with("MATERIALIZED")
    )
    grouped = select(
        m.c.status,
        m.c.trigger,
        cast(m.c.workflow_id, String),
        func.grouping(m.c.status, m.c.trigger, m.c.workflow_id),
        func.count(),
    ).group_by(
        func.grouping_sets(
            tuple_(m.c.status), tuple_(m.c.trigger), tuple_(m.c.workflow_id), tuple_()
        )
    )
    statement: Any = grouped
    if first_page is not None:
        order = [m.c.created_at, m.c.id]
        rank = func.row_number().over(
            order_by=[c.desc() if keyset.descending else c.asc() for c in order]
        )
        ranked = select(m.c.id, rank.label("rn")).subquery("p")
        statement = union_all(
            grouped,
            select(
                literal(None, String),
                literal(None, String),
                cast(ranked.c.id, String),
                literal(-1),
                ranked.c.rn,
            ).where(ranked.c.rn <= first_page[1]),
        )
    rows: list[tuple[str, Any, int]] = []
    page: list[tuple[int, str]] = []
    for status, trigger, wid, level, count in await session.execute(statement):
        if level == -1:
            page.append((count, wid))
            continue
        # grouping(): a bit set per column left out of the set (status 4, trigger 2, wf 1)
        name, value = {3: ("status", status), 5: ("trigger", trigger), 6: ("workflow", wid)}.get(
            level, ("total", None)
        )
        rows.append((name, value, count))
    workflows = await _workflows(session, {str(v) for f, v, _ in rows if f == "workflow"})
    tags: dict[str, int] = {}
    for f, wid, count in rows:
        for tag in workflows.get(str(wid), ("", []))[1] if f == "workflow" else []:
            tags[tag] = tags.get(tag, 0) + count
    rows += [("tag", tag, count) for tag, count in tags.items()]
    labels = {("workflow", wid): name for wid, (name, _) in workflows.items()}
    total, facets = facets_from_rows(rows, FACETS, labels)
    total, exact = capped(total)
    return total, exact, facets, workflows, [uuid.UUID(i) for _, i in sorted(page)]


async def search_runs(
    session: AsyncSession,
    criteria: Criteria,
    visible: Visibility,
    *,
    query: str,
    limit: int,
    cursor: str | None,
) -> SearchResult:
    """One page of runs matching ``criteria`` among ``visible`` ones, with facets.

    Raises :class:`~backend.search.model.CursorError` for a foreign cursor.
    """
    conds = conditions(criteria, visible)
    q = combined_query(criteria)
    snippet: ColumnElement[Any] = literal("")
    if q is not None:
        source = func.left(
            func.concat_ws(
                " ", cast(Run.input, Text), cast(Run.error, Text), cast(Run.output, Text)
            ),
            4000,
        )
        snippet = func.ts_headline(
            literal_column(f"'{TS_CONFIG}'::regconfig"),
            source,
            q,
            "StartSel=\ue000,StopSel=\ue001,MaxFragments=2,MaxWords=14,MinWords=4,"
            "FragmentDelimiter= … ",
        )
    columns = (
        Run.id,
        Run.status,
        Run.trigger,
        Run.version_number,
        Run.created_at,
        Run.finished_at,
        Run.workflow_id,
        Run.error["message"].astext,
        DURATION_MS,
    )
    page = select(*columns).where(*conds)
    relevance = criteria.sort == "relevance" and q is not None
    keyset = KEYSETS.get(criteria.sort, KEYSETS["newest"])
    one_pass = not relevance and cursor is None and keyset.name in ("newest", "oldest")
    first: list[Any] = []
    if one_pass:
        total, exact, facets, workflows, first = await _facets(
            session, criteria, conds, (keyset, limit + 1)
        )
        found = await session.execute(select(*columns).where(Run.id.in_(first)))
        rows = list(found.all())
        position = {rid: i for i, rid in enumerate(first)}
        rows.sort(key=lambda r: position[r[0]])
        more, rows = len(rows) > limit, rows[:limit]
        next_cursor = keyset.cursor_of([rows[-1][4], rows[-1][0]]) if more and rows else None
    else:
        rows, next_cursor = await fetch_page(
            session,
            page,
            keyset=keyset,
            key_of=lambda r: [r[8], r[0]] if keyset.name == "duration" else [r[4], r[0]],
            rank=func.ts_rank(RUN_VECTOR, q) if relevance else None,
            tiebreak=Run.id,
            cursor=cursor,
            limit=limit,
            by_index=q is None,
        )
    snippets: dict[Any, str] = {}
    if q is not None and rows:
        found = await session.execute(
            select(Run.id, snippet).where(Run.id.in_([r[0] for r in rows]))
        )
        snippets = {rid: text for rid, text in found}
    if not one_pass:
        total, exact, facets, workflows, _ = await _facets(session, criteria, conds)
    missing = {str(r[6]) for r in rows} - workflows.keys()
    if missing:
        workflows.update(await _workflows(session, missing))
    hits = [_hit(r, snippets.get(r[0], ""), workflows, query) for r in rows]
    return page_result("runs", query, criteria.sort, (total, exact, facets), hits, next_cursor)


def _hit(r: Any, snip: str, workflows: dict[str, tuple[str, list[str]]], query: str) -> Hit:
    (rid, status, trigger, version, created, finished, wid, error, dur) = r
    name, tags = workflows.get(str(wid), ("(deleted workflow)", []))
    return Hit(
        kind="run",
        id=str(rid),
        title=f"{name} #{version}",
        url=run_url(str(rid), query),
        at=created,
        status=status,
        snippet=(snip or "").replace("\ue000", "").replace("\ue001", "") or (error or ""),
        detail={
            "workflow_id": str(wid),
            "workflow_name": name,
            "version": version,
            "trigger": trigger,
            "tags": tags,
            "finished_at": finished,  # a datetime: answered RFC 3339 UTC ending Z
            "duration_ms": dur if dur is not None and dur >= 0 else None,
            "error": error,
        },
    )
