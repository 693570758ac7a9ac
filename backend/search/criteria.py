"""From a parsed query to checked, typed search criteria (pure; no I/O).

:func:`build_criteria` checks every field clause against its scope (docs/search.md,
"Fields"): a field of another scope, a bad status, date or number is a
:class:`~backend.search.query.QuerySyntaxError` naming the value and its position. Backends
(PostgreSQL, Elasticsearch) translate a :class:`Criteria` into their own query language.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from backend.search.query import (
    FieldClause,
    ParsedQuery,
    QuerySyntaxError,
    Scope,
    TextTerm,
    parse,
)

RUN_STATUSES = (
    "queued",
    "running",
    "waiting",
    "paused",
    "succeeded",
    "failed",
    "cancelled",
    "timed_out",
)
RUN_TRIGGERS = (
    "webhook",
    "schedule",
    "manual",
    "api",
    "subworkflow",
    "error",
    "rerun",
    "app_webhook",
    "polling",
    "broker",
    "email",
)

# The fields each scope accepts, besides the common ``in``, ``sort`` and time fields.
SCOPE_FIELDS: dict[Scope, frozenset[str]] = {
    Scope.RUNS: frozenset(
        {"status", "workflow", "tag", "trigger", "version", "step", "error", "id"}
    ),
    Scope.WORKFLOWS: frozenset({"tag", "type", "owner", "published"}),
    Scope.AUDIT: frozenset({"action", "actor", "object"}),
}
TIME_FIELDS = frozenset({"after", "before", "since"})
COMMON_FIELDS = frozenset({"in", "sort"}) | TIME_FIELDS
ALL_FIELDS = frozenset().union(*SCOPE_FIELDS.values()) | COMMON_FIELDS

SortName = Literal["newest", "oldest", "duration", "relevance", "name"]
"""Every sort some scope offers (the ``sort`` parameter's values; :data:`SORTS` per scope)."""

SORTS: dict[Scope, tuple[SortName, ...]] = {
    Scope.RUNS: ("newest", "oldest", "duration", "relevance"),
    Scope.WORKFLOWS: ("relevance", "name", "newest", "oldest"),
    Scope.AUDIT: ("newest", "oldest", "relevance"),
}
DEFAULT_SORT = {Scope.RUNS: "newest", Scope.WORKFLOWS: "relevance", Scope.AUDIT: "newest"}
UNRANKED_SORT = {Scope.RUNS: "newest", Scope.WORKFLOWS: "name", Scope.AUDIT: "newest"}
"""What a relevance sort means without free text to rank by: the scope's natural order."""

_RELATIVE = re.compile(r"(\d{1,6})([mhdw])")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class SortArgumentError(ValueError):
    """The ``sort`` argument (not a ``sort:`` of the query text) is no sort of the scope:
    ``message`` says why and which sorts the scope has."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Filter:
    """One checked field clause: ``values`` normalised (lower-case statuses, ints for
    versions, ...); OR between values, ``negated`` for ``-field:...``."""

    field: str
    values: tuple[str | int, ...]
    negated: bool = False


@dataclass
class Criteria:
    """What to search for, backend-neutral.

    ``text``: free-text terms (AND); ``filters``: field filters (AND); ``after``/``before``:
    the time window (``after <= t < before``, UTC) on the scope's time (run created, workflow
    updated, audit entry written); ``sort``: one of :data:`SORTS` of the scope.
    """

    scope: Scope
    text: list[TextTerm] = field(default_factory=list)
    filters: list[Filter] = field(default_factory=list)
    after: datetime | None = None
    before: datetime | None = None
    sort: str = "newest"

    def values(self, name: str, *, negated: bool = False) -> list[tuple[str | int, ...]]:
        """The value tuples of the filters on ``name`` (negated ones when asked)."""
        return [f.values for f in self.filters if f.field == name and f.negated == negated]

    @property
    def has_text(self) -> bool:
        """Whether any positive free-text term is present."""
        return any(not t.negated for t in self.text)

    def drop_unranked_relevance(self) -> None:
        """Sort by :data:`UNRANKED_SORT` when asked for relevance without free text (every
        backend does this before searching)."""
        if self.sort == "relevance" and not self.has_text:
            self.sort = UNRANKED_SORT[self.scope]


def _time(value: str, clause: FieldClause, now: datetime) -> datetime:
    if clause.field == "since":
        m = _RELATIVE.fullmatch(value.lower())
        if m:
            return now - timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        example = "since:24h, since:7d or " if clause.field == "since" else ""
        raise QuerySyntaxError(
            f"{clause.field}: {value!r} is not a time ({example}an ISO date like 2026-11-30"
            " or 2026-11-30T14:00)",
            clause.position,
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _check(clause: FieldClause, scope: Scope) -> tuple[str | int, ...]:
    name, raw = clause.field, clause.values
    choices = {"status": RUN_STATUSES, "trigger": RUN_TRIGGERS}.get(name)
    if choices is not None:
        values = tuple(v.lower() for v in raw)
        bad = [v for v in values if v not in choices]
        if bad:
            kind = "run status" if name == "status" else "trigger"
            raise QuerySyntaxError(
                f"{name}: {bad[0]!r} is not a {kind} ({', '.join(choices)})", clause.position
            )
        return values
    if name == "version":
        if not all(v.isdigit() and len(v) < 9 for v in raw):
            raise QuerySyntaxError(
                "version: needs a version number, e.g. version:3", clause.position
            )
        return tuple(int(v) for v in raw)
    if name == "id":
        try:
            return tuple(str(uuid.UUID(v)) for v in raw)
        except ValueError:
            raise QuerySyntaxError("id: needs a run id (a UUID)", clause.position) from None
    if name == "published":
        values = tuple(v.lower() for v in raw)
        if any(v not in ("yes", "no") for v in values):
            raise QuerySyntaxError("published: is yes or no", clause.position)
        return values
    if name in ("tag", "type", "action", "object"):
        return tuple(v.lower() for v in raw)
    return tuple(raw)


def build_criteria(
    text: str,
    *,
    scope: Scope | None = None,
    sort: str | None = None,
    now: datetime | None = None,
) -> Criteria:
    """Parse and check the query ``text`` for ``scope`` (``in:`` in the text wins over the
    argument; default runs). ``sort`` (e.g. from a URL parameter) applies unless the text
    has ``sort:``. ``now`` anchors ``since:24h`` (default: the current UTC time).

    Raises :class:`QuerySyntaxError` (message and position) for anything malformed in the
    text, :class:`SortArgumentError` for a ``sort`` argument the scope does not offer.
    """
    now = now or datetime.now(UTC)
    parsed: ParsedQuery = parse(text, ALL_FIELDS)
    for clause in parsed.fields("in"):
        try:
            scope = Scope(clause.values[0].lower())
        except ValueError:
            raise QuerySyntaxError(
                f"in: is one of {', '.join(s.value for s in Scope)}", clause.position
            ) from None
    scope = scope or Scope.RUNS
    criteria = Criteria(scope=scope, text=parsed.text, sort=sort or DEFAULT_SORT[scope])
    sort_clauses = parsed.fields("sort")
    for clause in sort_clauses:
        criteria.sort = clause.values[0].lower()
    if criteria.sort not in SORTS[scope]:
        message = f"sort: {criteria.sort!r} does not sort {scope.value} ({', '.join(SORTS[scope])})"
        if not sort_clauses:  # the argument's sort, not one written in the text
            raise SortArgumentError(message)
        raise QuerySyntaxError(message, sort_clauses[0].position)
    for clause in parsed.clauses:
        if clause.field in ("in", "sort"):
            continue
        if clause.field in TIME_FIELDS:
            if clause.negated or len(clause.values) != 1:
                raise QuerySyntaxError(
                    f"{clause.field}: takes one time and cannot be negated", clause.position
                )
            t = _time(clause.values[0], clause, now)
            if clause.field == "before":
                criteria.before = t if criteria.before is None else min(criteria.before, t)
            else:
                criteria.after = t if criteria.after is None else max(criteria.after, t)
            continue
        if clause.field not in SCOPE_FIELDS[scope]:
            owners = [s.value for s, names in SCOPE_FIELDS.items() if clause.field in names]
            raise QuerySyntaxError(
                f"{clause.field}: searches {' and '.join(owners)}, not {scope.value}"
                f" (add in:{owners[0]})",
                clause.position,
            )
        criteria.filters.append(Filter(clause.field, _check(clause, scope), clause.negated))
    return criteria
