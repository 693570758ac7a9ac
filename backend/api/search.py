"""``/api/search``: one search over runs, workflows and the audit log (docs/search.md).

``q`` is the search box's query (``status:failed workflow:"Order intake" tag:billing
"timeout"``); ``in`` picks runs (default), workflows or audit; ``sort`` a sort of that
scope; ``cursor`` the previous page's ``next_cursor``; ``limit`` 1..100. Hits are limited
to what the caller may open. A malformed query answers 400 with ``field`` ``q`` and the
``position`` of the fault in ``extra``.
"""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, get
from litestar.params import FromQuery, QueryParameter

from backend.auth.policy import Permission
from backend.search.model import PAGE_SIZE, SearchResult
from backend.services import search as svc
from backend.web.authentication import AppRuntime, DbSession
from backend.web.guards import CurrentPrincipal, access_dependencies


class SearchController(Controller):
    """The search API (any logged-in user; results filtered per object)."""

    path = "/api/v1/search"
    tags = ["search"]
    dependencies = access_dependencies()

    @get("/", operation_id="search", opt={"permission": Permission.WORKFLOW_LIST})
    async def search(
        self,
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
        q: FromQuery[str] = "",
        search_in: Annotated[str | None, QueryParameter(name="in")] = None,
        sort: FromQuery[str | None] = None,
        cursor: FromQuery[str | None] = None,
        limit: FromQuery[int] = PAGE_SIZE,
    ) -> SearchResult:
        """One page of hits with facet counts and the cursor of the next page.

        ``in`` (runs, workflows, audit) may also be written in ``q`` (``in:workflows``)."""
        backend = svc.backend_for(runtime.settings, runtime.sessionmaker)
        return await svc.search(
            db, backend, principal, q=q, scope=search_in, sort=sort, cursor=cursor, limit=limit
        )
