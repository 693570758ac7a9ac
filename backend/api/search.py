"""``/api/search``: one search over runs, workflows and the audit log (docs/search.md).

``q`` is the search box's query (``status:failed workflow:"Order intake" tag:billing
"timeout"``); ``in`` picks runs (default), workflows or audit; ``sort`` a sort of that
scope; ``cursor`` the previous page's ``next_cursor``; ``limit`` 1..100. Answers the list
envelope (docs/api.md, "Lists"): hits in ``data``. Hits are limited to what the caller
may open. A malformed query answers 400 with ``field`` ``q`` and the
``position`` of the fault in ``extra``.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, get
from litestar.params import FromQuery, QueryParameter

from backend.api.lists import ListPage, page_links
from backend.auth.policy import Permission
from backend.search.model import PAGE_SIZE, Facet, Hit
from backend.services import search as svc
from backend.services.paging import Slice
from backend.web.authentication import AppRuntime, DbSession
from backend.web.guards import CurrentPrincipal, access_dependencies


class SearchList(ListPage):
    """A page of search hits in the list envelope, with what the search was (``scope``,
    ``query``, ``sort``), how many match (``total``, exact when ``total_exact``), the
    ``facets`` and which ``backend`` answered (backend.search.model.SearchResult)."""

    data: list[Hit]
    scope: str
    query: str
    sort: str
    total: int
    total_exact: bool
    facets: list[Facet]
    backend: str


class SearchController(Controller):
    """The search API (any logged-in user; results filtered per object)."""

    path = "/api/v1/search"
    tags = ["search"]
    dependencies = access_dependencies()

    @get("/", operation_id="search", opt={"permission": Permission.WORKFLOW_LIST})
    async def search(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
        q: FromQuery[str] = "",
        search_in: Annotated[str | None, QueryParameter(name="in")] = None,
        sort: FromQuery[str | None] = None,
        cursor: FromQuery[str | None] = None,
        limit: FromQuery[int] = PAGE_SIZE,
    ) -> SearchList:
        """One page of hits (``data``) with facet counts, in the list envelope.

        ``in`` (runs, workflows, audit) may also be written in ``q`` (``in:workflows``)."""
        backend = svc.backend_for(runtime.settings, runtime.sessionmaker)
        found = await svc.search(
            db, backend, principal, q=q, scope=search_in, sort=sort, cursor=cursor, limit=limit
        )
        links = page_links(request, Slice(found.hits, found.next_cursor))
        base = runtime.settings.base_url.rstrip("/")
        hits = [  # each hit's page as an absolute URL (docs/api.md, "Answers")
            msgspec.structs.replace(h, url=base + h.url) if h.url.startswith("/") else h
            for h in found.hits
        ]
        return SearchList(
            data=hits,
            scope=found.scope,
            query=found.query,
            sort=found.sort,
            total=found.total,
            total_exact=found.total_exact,
            facets=found.facets,
            backend=found.backend,
            **links,
        )
