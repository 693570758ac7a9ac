"""The search use case: parse the query, work out what the caller may see with the same
rules as every list (:mod:`backend.services.identity.access`), and ask the configured backend.

A user never sees a hit they could not open: runs and workflows are limited to the
workflows the principal reads (owner, grants on the workflow or its project, role ceiling,
token scope); audit entries need ``audit:read``. docs/search.md documents the syntax.
"""

from __future__ import annotations

import weakref
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.auth.policy import Level, Permission, Principal, has_system
from backend.db.models import Workflow
from backend.search.criteria import SORTS, SortArgumentError, build_criteria
from backend.search.model import (
    MAX_PAGE_SIZE,
    PAGE_SIZE,
    CursorError,
    SearchBackend,
    SearchResult,
    Visibility,
)
from backend.search.postgres import PostgresSearch
from backend.search.query import QuerySyntaxError, Scope
from backend.services.errors import InvalidInput
from backend.services.identity import access
from backend.settings import Settings


class SearchInputError(InvalidInput):
    """A query, scope, sort, cursor or limit the search refuses (400). ``field`` names the
    parameter (``q``, ``cursor``, ...); ``position`` the character of ``q`` at fault."""

    def __init__(self, message: str, field: str, position: int | None = None) -> None:
        super().__init__(message, field)
        self.position = position


SCOPES = tuple(s.value for s in Scope)


def sorts_of(scope: str) -> tuple[str, ...]:
    """The sorts a scope offers (docs/search.md, "Fields")."""
    return SORTS[Scope(scope)] if scope in SCOPES else ()


_backends: weakref.WeakKeyDictionary[Any, SearchBackend] = weakref.WeakKeyDictionary()


def backend_for(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> SearchBackend:
    """The search backend of ``settings`` (one per database pool): PostgreSQL, or
    Elasticsearch at ``settings.elasticsearch_url`` when ``search_backend`` says so."""
    found = _backends.get(sessionmaker)
    if found is None:
        if settings.search_backend == "elasticsearch":
            from backend.search.elastic import ElasticSearch

            found = ElasticSearch.from_settings(settings, sessionmaker)
        else:
            found = PostgresSearch(sessionmaker)
        _backends[sessionmaker] = found
    return found


async def visibility(session: AsyncSession, principal: Principal) -> Visibility:
    """What ``principal`` may find: the workflows it reads (None: all, for an admin whose
    token allows reading) and whether it reads the audit log."""
    audit = has_system(principal, Permission.AUDIT_READ)
    if principal.is_admin and principal.token_level() >= Level.READ:
        return Visibility(None, audit)
    clause = await access.workflow_filter(session, principal)
    ids = (await session.execute(select(Workflow.id).where(clause))).scalars()
    return Visibility(frozenset(str(i) for i in ids), audit)


def parse_scope(value: str | None) -> Scope | None:
    """The ``in`` parameter as a :class:`Scope` (None when absent); 400 for another."""
    if not value:
        return None
    try:
        return Scope(value)
    except ValueError:
        raise SearchInputError(
            f"in: is one of {', '.join(s.value for s in Scope)}", field="in"
        ) from None


async def search(
    session: AsyncSession,
    backend: SearchBackend,
    principal: Principal,
    *,
    q: str,
    scope: str | None = None,
    sort: str | None = None,
    cursor: str | None = None,
    limit: int = PAGE_SIZE,
) -> SearchResult:
    """Run the search ``q`` for ``principal``.

    ``scope``: runs (default), workflows or audit (``in:`` in ``q`` wins); ``sort``: a sort
    of the scope (``sort:`` in ``q`` wins); ``cursor``: the previous page's
    ``next_cursor``; ``limit``: 1..100 hits per page. Raises :class:`SearchInputError`
    (400) for a malformed query (message and position; ``field`` ``q``), a bad ``sort``
    (``field`` ``sort``, or ``q`` for a ``sort:`` in the query), cursor or limit.
    """
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise SearchInputError(f"limit: between 1 and {MAX_PAGE_SIZE}", field="limit")
    try:
        criteria = build_criteria(q, scope=parse_scope(scope), sort=sort or None)
    except QuerySyntaxError as exc:
        raise SearchInputError(str(exc), field="q", position=exc.position) from exc
    except SortArgumentError as exc:
        raise SearchInputError(exc.message, field="sort") from exc
    visible = await visibility(session, principal)
    try:
        return await backend.search(criteria, visible, query=q, limit=limit, cursor=cursor)
    except CursorError as exc:
        raise SearchInputError(str(exc), field="cursor") from exc
