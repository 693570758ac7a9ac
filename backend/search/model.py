"""The search interface every backend implements, its result shapes and cursors (pure).

A backend (:class:`SearchBackend`) answers a :class:`~backend.search.criteria.Criteria`
for what the caller may see (:class:`Visibility`) with a :class:`SearchResult`: one page of
:class:`Hit` s, facet counts and an opaque ``next_cursor`` (keyset pagination: the sort
values and id of the last hit, base64url JSON; docs/search.md, "API").
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import msgspec

from backend.search.criteria import Criteria

PAGE_SIZE = 25
MAX_PAGE_SIZE = 100
# facets and totals count at most this many matches (a "10000+" total beyond it)
COUNT_LIMIT = 10_000
FACET_SIZE = 10


class CursorError(ValueError):
    """A ``cursor`` parameter that is not one this search produced."""


@dataclass(frozen=True)
class Visibility:
    """What a caller may see: ``workflow_ids`` (runs and workflows; ``None`` = every
    workflow, for admins) and ``audit`` (whether audit entries are searchable)."""

    workflow_ids: frozenset[str] | None
    audit: bool


class Hit(msgspec.Struct):
    """One result. ``kind``: run, workflow or audit; ``url``: the page that opens it;
    ``at``: its time (run created, workflow updated, audit written); ``snippet``: where the
    free text matched (may be empty); ``detail``: kind-specific fields (docs/search.md)."""

    kind: str
    id: str
    title: str
    url: str
    at: datetime | None
    status: str | None = None
    snippet: str = ""
    detail: dict[str, Any] = msgspec.field(default_factory=dict)


class FacetValue(msgspec.Struct):
    """One value of a facet with the number of matches holding it (``label`` for display)."""

    value: str
    count: int
    label: str = ""


class Facet(msgspec.Struct):
    """A facet: ``field`` is the query field that filters by it (``status``, ``tag``, ...)."""

    field: str
    values: list[FacetValue]


class SearchResult(msgspec.Struct):
    """One page of results.

    ``total``: matches (exact when ``total_exact``; otherwise at least :data:`COUNT_LIMIT`,
    and facet counts are over the first :data:`COUNT_LIMIT` matches in sort order);
    ``next_cursor``: pass it as ``cursor`` for the next page (``None`` on the last);
    ``backend``: which backend answered (postgres or elasticsearch).
    """

    scope: str
    query: str
    sort: str
    total: int
    total_exact: bool
    hits: list[Hit]
    facets: list[Facet]
    next_cursor: str | None
    backend: str


class SearchBackend(Protocol):
    """A search backend: PostgreSQL (the embedded default) or Elasticsearch."""

    name: str

    async def search(
        self,
        criteria: Criteria,
        visible: Visibility,
        *,
        query: str,
        limit: int = PAGE_SIZE,
        cursor: str | None = None,
    ) -> SearchResult:
        """One page of ``criteria``'s matches that ``visible`` allows, after ``cursor``.
        Raises :class:`CursorError` for a cursor from another search or sort."""
        ...


def encode_cursor(sort: str, key: list[Any]) -> str:
    """The opaque cursor after a hit whose sort ``key`` (JSON values) is given."""
    raw = json.dumps([sort, *key], separators=(",", ":"), default=str).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, sort: str, size: int) -> list[Any]:
    """The sort key in ``cursor``; raises :class:`CursorError` when it is malformed, was made
    for another sort, or does not hold ``size`` values."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise CursorError("cursor: not a cursor of this search") from None
    if not isinstance(data, list) or len(data) != size + 1 or data[0] != sort:
        raise CursorError("cursor: made for another search or sort; start from the first page")
    return data[1:]
