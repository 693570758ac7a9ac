"""The PostgreSQL search backend (the embedded default): queries the product's own tables
through the indexes of migration 0020_search, so there is nothing to index and a change is
searchable when its transaction commits. See docs/search.md, "Backends"."""

from __future__ import annotations

import logging

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.search.criteria import Criteria
from backend.search.model import PAGE_SIZE, SearchResult, Visibility
from backend.search.pg_audit import search_audit
from backend.search.pg_runs import search_runs
from backend.search.pg_workflows import search_workflows
from backend.search.query import Scope

log = logging.getLogger(__name__)


class PostgresSearch:
    """:class:`~backend.search.model.SearchBackend` over PostgreSQL.

    ``sessionmaker``: the product's database. Whether pg_trgm is installed is read once
    (fuzzy workflow names need it; without it names match by substring, logged once).
    """

    name = "postgres"

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self.sessionmaker = sessionmaker
        self._trigram: bool | None = None

    async def _has_trigram(self, session: AsyncSession) -> bool:
        if self._trigram is None:
            found = await session.execute(
                text("select 1 from pg_extension where extname = 'pg_trgm'")
            )
            self._trigram = found.scalar() is not None
            if not self._trigram:
                log.warning("pg_trgm is not installed: workflow names match by substring only")
        return self._trigram

    async def search(
        self,
        criteria: Criteria,
        visible: Visibility,
        *,
        query: str,
        limit: int = PAGE_SIZE,
        cursor: str | None = None,
    ) -> SearchResult:
        """One page of results (see :class:`~backend.search.model.SearchBackend`)."""
        criteria.drop_unranked_relevance()
        async with self.sessionmaker() as session:
            if criteria.scope is Scope.WORKFLOWS:
                trigram = await self._has_trigram(session)
                return await search_workflows(
                    session,
                    criteria,
                    visible,
                    query=query,
                    limit=limit,
                    cursor=cursor,
                    trigram=trigram,
                )
            search = search_audit if criteria.scope is Scope.AUDIT else search_runs
            return await search(session, criteria, visible, query=query, limit=limit, cursor=cursor)
