"""The search results page (``/search``): the header's search box lands here.

Tabs for runs, workflows and (with ``audit:read``) the audit log; facets whose values add
their clause to the query; one page of hits and a link to the next (docs/search.md).
"""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import urlencode

from litestar import Request, Response, get
from litestar.params import FromQuery, QueryParameter

from backend.auth.policy import Permission, has_system
from backend.search.model import SearchResult
from backend.services.search import search as svc
from backend.web.authentication import AppRuntime, DbSession
from backend.web.guards import CurrentPrincipal
from frontend.pages import LoginRequiredPages, render

FACET_TITLES = {
    "status": "Status",
    "workflow": "Workflow",
    "trigger": "Trigger",
    "tag": "Tag",
    "type": "Node type",
    "action": "Action",
    "object": "Object",
    "actor": "Actor",
}
_BARE = re.compile(r"[^\s\",]+")


def quoted(value: str) -> str:
    """``value`` as a query value: bare when it has no space, quote or comma."""
    if _BARE.fullmatch(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def with_clause(q: str, field: str, value: str) -> str:
    """The query ``q`` narrowed by ``field:value`` (unchanged when already there)."""
    clause = f"{field}:{quoted(value)}"
    return q if clause in q.split() else f"{q} {clause}".strip()


def search_url(q: str, scope: str, sort: str | None = None, cursor: str | None = None) -> str:
    """The results page of a query (only the parameters that are set)."""
    params = {"q": q, "in": scope, "sort": sort or "", "cursor": cursor or ""}
    return "/search?" + urlencode({k: v for k, v in params.items() if v})


class SearchPages(LoginRequiredPages):
    """The results page."""

    @get("/search", operation_id="page_search", opt={"permission": Permission.WORKFLOW_LIST})
    async def search_page(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
        q: FromQuery[str] = "",
        search_in: Annotated[str, QueryParameter(name="in")] = "runs",
        sort: FromQuery[str | None] = None,
        cursor: FromQuery[str | None] = None,
    ) -> Response[str]:
        """One page of results for ``q`` (400 with the parser's message and position)."""
        backend = svc.backend_for(runtime.settings, runtime.sessionmaker)
        error: svc.SearchInputError | None = None
        result: SearchResult | None = None
        try:
            result = await svc.search(
                db, backend, principal, q=q, scope=search_in, sort=sort, cursor=cursor
            )
        except svc.SearchInputError as exc:
            error = exc
        scope = result.scope if result else (search_in if search_in in svc.SCOPES else "runs")
        tabs = [("runs", "Runs"), ("workflows", "Workflows")]
        if has_system(principal, Permission.AUDIT_READ):
            tabs.append(("audit", "Audit log"))
        facets = []
        for f in result.facets if result else []:
            values = [
                {
                    "label": v.label or v.value.replace("_", " "),
                    "count": v.count,
                    "url": search_url(with_clause(q, f.field, v.value), scope, sort),
                }
                for v in f.values
            ]
            if values:
                facets.append({"title": FACET_TITLES.get(f.field, f.field), "values": values})
        return render(
            request,
            "search.html",
            status_code=400 if error else 200,
            q=q,
            scope=scope,
            sort=result.sort if result else sort,
            result=result,
            error=error,
            tabs=[(s, label, search_url(q, s)) for s, label in tabs],
            facets=facets,
            next_url=(
                search_url(q, scope, sort, result.next_cursor)
                if result and result.next_cursor
                else None
            ),
            sorts=[(s, search_url(q, scope, s)) for s in svc.sorts_of(scope)],
        )
