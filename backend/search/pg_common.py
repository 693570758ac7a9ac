"""Pieces shared by the PostgreSQL searches of runs, workflows and the audit log.

Full text uses the ``simple`` configuration (no stemming, no stop words: values like ids,
e-mail addresses and error codes are matched as typed, case-insensitively). A word becomes
``plainto_tsquery``, a quoted phrase ``phraseto_tsquery`` (words adjacent, in order), and
``-term`` negates. Sources: PostgreSQL manual, "Controlling Text Search" (12.3) and
"GIN and GiST Index Types" (12.9).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    String,
    and_,
    false,
    func,
    literal,
    literal_column,
    not_,
    or_,
    select,
    tuple_,
    union_all,
)
from sqlalchemy.orm import QueryableAttribute

from backend.search.criteria import Criteria
from backend.search.model import (
    COUNT_LIMIT,
    FACET_SIZE,
    Facet,
    FacetValue,
    Hit,
    SearchResult,
    decode_cursor,
    encode_cursor,
)
from backend.search.query import TextTerm

TS_CONFIG = "simple"

Expr = ColumnElement[Any] | QueryableAttribute[Any]
"""A column or SQL expression (mapped attributes included)."""


def tsquery(term: TextTerm) -> ColumnElement[Any]:
    """The ``tsquery`` of one free-text term."""
    fn = func.phraseto_tsquery if term.phrase else func.plainto_tsquery
    return fn(literal_column(f"'{TS_CONFIG}'::regconfig"), term.text)


def text_conditions(
    criteria: Criteria,
    vector: Expr,
    extra: Callable[[TextTerm], ColumnElement[bool]] | None = None,
) -> list[ColumnElement[bool]]:
    """One condition per free-text term: ``vector @@ query`` (or ``extra(term)``, e.g. a
    fuzzy name match), negated for ``-term``."""
    out: list[ColumnElement[bool]] = []
    for term in criteria.text:
        cond: ColumnElement[bool] = vector.bool_op("@@")(tsquery(term))
        if extra is not None:
            cond = or_(cond, extra(term))
        out.append(not_(cond) if term.negated else cond)
    return out


def combined_query(criteria: Criteria) -> ColumnElement[Any] | None:
    """The AND of the positive terms' queries (for ranking and headlines), or None."""
    parts = [tsquery(t) for t in criteria.text if not t.negated]
    if not parts:
        return None
    q = parts[0]
    for p in parts[1:]:
        q = q.op("&&")(p)
    return q


def one_of(column: Expr, values: Sequence[Any], negated: bool) -> ColumnElement[bool]:
    """``column IN values`` (or NOT IN)."""
    cond = column.in_(list(values))
    return not_(cond) if negated else cond


def negate(cond: ColumnElement[bool], negated: bool) -> ColumnElement[bool]:
    """``cond`` or its negation."""
    return not_(cond) if negated else cond


def uuids(values: Sequence[Any]) -> list[uuid.UUID]:
    """The values that are UUIDs."""
    out = []
    for v in values:
        try:
            out.append(uuid.UUID(str(v)))
        except ValueError:
            continue
    return out


def visible_condition(column: Expr, ids: frozenset[str] | None) -> ColumnElement[bool]:
    """Rows whose workflow is in ``ids`` (every row when ``ids`` is None)."""
    if ids is None:
        return literal(True)
    return column.in_(uuids(sorted(ids))) if ids else false()


def time_window(criteria: Criteria, column: Expr) -> list[ColumnElement[bool]]:
    """``after <= column < before`` conditions of the criteria."""
    out: list[ColumnElement[bool]] = []
    if criteria.after is not None:
        out.append(column >= criteria.after)
    if criteria.before is not None:
        out.append(column < criteria.before)
    return out


@dataclass(frozen=True)
class Keyset:
    """A keyset sort: ``columns`` in order, all descending or all ascending; the cursor
    holds their values (times as ISO text) and the row id."""

    name: str
    columns: tuple[Expr, ...]
    descending: bool
    kinds: tuple[str, ...]  # "time", "num", "uuid", "int" per column

    def order_by(self, *, by_index: bool = True) -> list[Any]:
        """ORDER BY items. ``by_index=False`` (free-text searches) sorts by an expression no
        btree index provides, so PostgreSQL finds the matches through the GIN index and
        sorts them, rather than walking the time index and testing every row on the way
        (which costs a full scan when the text is rare)."""
        cols = self.columns if by_index else tuple(unindexed(c) for c in self.columns)
        return [c.desc() if self.descending else c.asc() for c in cols]

    def after(self, cursor: str) -> ColumnElement[bool]:
        """The condition for rows after ``cursor`` (raises CursorError for a bad one)."""
        raw = decode_cursor(cursor, self.name, len(self.columns))
        try:
            values = [_load(k, v) for k, v in zip(self.kinds, raw, strict=True)]
        except (TypeError, ValueError):
            from backend.search.model import CursorError

            raise CursorError("cursor: not a cursor of this search") from None
        left, right = tuple_(*self.columns), tuple_(*[literal(v) for v in values])
        return and_(left < right) if self.descending else and_(left > right)

    def cursor_of(self, row_values: Sequence[Any]) -> str:
        """The cursor after a row whose sort values are ``row_values``."""
        return encode_cursor(self.name, [_dump(v) for v in row_values])


def unindexed(column: Any) -> Any:
    """``column`` wrapped so no index matches it (same value and order)."""
    return func.coalesce(column, column)


def _load(kind: str, value: Any) -> Any:
    if kind == "time":
        return datetime.fromisoformat(str(value))
    if kind == "uuid":
        return uuid.UUID(str(value))
    if kind == "int":
        return int(value)
    if kind == "str":
        return str(value)
    return float(value)


def _dump(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def offset_of(cursor: str | None, sort: str) -> int:
    """The offset held by a relevance cursor (0 without one)."""
    if cursor is None:
        return 0
    raw = decode_cursor(cursor, sort, 1)[0]
    if not isinstance(raw, int) or raw < 0:
        from backend.search.model import CursorError

        raise CursorError("cursor: not a cursor of this search")
    return raw


def facets_from_rows(
    rows: Sequence[Any], order: Sequence[str], labels: dict[tuple[str, str], str] | None = None
) -> tuple[int, list[Facet]]:
    """Group ``(facet, value, count)`` rows (a ``("total", None, n)`` row gives the count)
    into facets in ``order``, the :data:`FACET_SIZE` largest values of each."""
    total = 0
    grouped: dict[str, list[FacetValue]] = {name: [] for name in order}
    for name, value, count in rows:
        if name == "total":
            total = int(count)
        elif name in grouped and value is not None:
            label = (labels or {}).get((name, str(value)), "")
            grouped[name].append(FacetValue(str(value), int(count), label))
    facets = [
        Facet(name, sorted(values, key=lambda v: (-v.count, v.value))[:FACET_SIZE])
        for name, values in grouped.items()
    ]
    return total, facets


def count_of(matches: Any) -> Any:
    """The ``("total", NULL, count)`` row over ``matches`` (a CTE), for :func:`counted_page`."""
    return select(literal("total"), literal(None, String), func.count()).select_from(matches)


async def counted_page(
    session: Any,
    parts: Sequence[Any],
    order: Sequence[str],
    *,
    scope: str,
    query: str,
    sort: str,
    hits: list[Hit],
    next_cursor: str | None,
) -> SearchResult:
    """A PostgreSQL :class:`SearchResult`: ``hits`` with the total and facets that
    ``parts`` (SELECTs of ``(facet, value, count)`` rows, one of them :func:`count_of`)
    count in one UNION ALL, the facets in ``order``."""
    rows = list((await session.execute(union_all(*parts))).all())
    total, facets = facets_from_rows(rows, order)
    return page_result(scope, query, sort, (*capped(total), facets), hits, next_cursor)


def page_result(
    scope: str,
    query: str,
    sort: str,
    counted: tuple[int, bool, list[Facet]],
    hits: list[Hit],
    next_cursor: str | None,
) -> SearchResult:
    """The PostgreSQL backend's :class:`SearchResult`; ``counted``: (total, whether it is
    exact, facets)."""
    total, exact, facets = counted
    return SearchResult(
        scope=scope,
        query=query,
        sort=sort,
        total=total,
        total_exact=exact,
        hits=hits,
        facets=facets,
        next_cursor=next_cursor,
        backend="postgres",
    )


def capped(total: int) -> tuple[int, bool]:
    """``(total, exact)`` of a count over at most ``COUNT_LIMIT + 1`` rows."""
    return (COUNT_LIMIT, False) if total > COUNT_LIMIT else (total, True)


async def fetch_page(
    session: Any,
    page: Any,
    *,
    keyset: Keyset,
    key_of: Callable[[Any], list[Any]],
    rank: ColumnElement[Any] | None,
    tiebreak: Expr,
    cursor: str | None,
    limit: int,
    by_index: bool = True,
) -> tuple[list[Any], str | None]:
    """One page of ``page`` (a SELECT with its WHERE) and the cursor of the next one.

    ``rank`` given: by relevance (rank descending, ``tiebreak`` descending), the cursor an
    offset; otherwise by ``keyset`` after ``cursor``, the cursor ``key_of(last row)``.
    """
    offset = 0
    if rank is not None:
        offset = offset_of(cursor, "relevance")
        page = page.order_by(rank.desc(), tiebreak.desc()).offset(offset)
    else:
        if cursor:
            page = page.where(keyset.after(cursor))
        page = page.order_by(*keyset.order_by(by_index=by_index))
    rows = list((await session.execute(page.limit(limit + 1))).all())
    more, rows = len(rows) > limit, rows[:limit]
    if not (more and rows):
        return rows, None
    if rank is not None:
        return rows, encode_cursor("relevance", [offset + limit])
    return rows, keyset.cursor_of(key_of(rows[-1]))
