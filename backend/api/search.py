"""``/api/search``: one search over runs, workflows and the audit log (docs/search.md).

``q`` is the search box's query (``status:failed workflow:"Order intake" tag:billing
"timeout"``); ``in`` picks runs (default), workflows or audit; ``sort`` a sort of that
scope; ``cursor`` the previous page's ``next_cursor``; ``limit`` 1..100. Answers the list
envelope (docs/api.md, "Lists"): hits in ``data``. Hits are limited to what the caller
may open. A malformed query answers 400 naming the parameter ``q`` with the 0-based
``position`` of the fault; a bad ``in``, ``sort`` or ``limit`` a 400 naming that parameter.
The document states each parameter's values and bounds.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, get
from litestar.params import FromQuery, QueryParameter

from backend.api.lists import ListPage, page_links
from backend.auth.policy import Permission
from backend.search.criteria import SORTS, SortName
from backend.search.model import MAX_PAGE_SIZE, PAGE_SIZE, Facet, Hit
from backend.search.query import Scope
from backend.services.paging import Slice
from backend.services.search import search as svc
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


_SORTS_PER_SCOPE = "; ".join(f"{scope.value}: {', '.join(names)}" for scope, names in SORTS.items())

SearchScope = Annotated[
    Scope | None,
    QueryParameter(
        name="in",
        description="What to search: runs (the default), workflows or audit (an `in:` in "
        "`q` wins).",
    ),
]
SearchSort = Annotated[
    SortName | None,
    QueryParameter(
        description=f"The order of the hits; each scope has its own ({_SORTS_PER_SCOPE}), "
        "another is a 400 naming `sort` (a `sort:` in `q` wins). Default: runs and audit "
        "newest, workflows relevance.",
    ),
]
SearchLimit = Annotated[
    int,
    QueryParameter(
        ge=1,
        le=MAX_PAGE_SIZE,
        description=f"Most hits on the page, 1 to {MAX_PAGE_SIZE} (400 outside).",
    ),
]


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
        search_in: SearchScope = None,
        sort: SearchSort = None,
        cursor: FromQuery[str | None] = None,
        limit: SearchLimit = PAGE_SIZE,
    ) -> SearchList:
        """One page of hits (``data``) with facet counts, in the list envelope.

        ``in`` (runs, workflows, audit) may also be written in ``q`` (``in:workflows``)."""
        backend = svc.backend_for(runtime.settings, runtime.sessionmaker)
        found = await svc.search(
            db,
            backend,
            principal,
            q=q,
            scope=search_in.value if search_in else None,
            sort=sort,
            cursor=cursor,
            limit=limit,
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
