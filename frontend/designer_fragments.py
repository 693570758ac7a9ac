"""HTML fragments of the designer's config panel beyond the panel itself: the options of a
workflow picker (``GET /designer/workflow-options``), filtered by permission."""

from __future__ import annotations

import uuid

from litestar import MediaType, Request, Response, get
from litestar.params import FromQuery

from backend.auth.policy import Permission
from backend.services.workflows import workflow_picker
from backend.web.authentication import DbSession
from backend.web.guards import CurrentPrincipal
from frontend.pages import ENV, LoginRequiredPages


class DesignerFragments(LoginRequiredPages):
    """Fragments the designer's config panel loads (login required)."""

    @get(
        "/designer/workflow-options",
        operation_id="fragment_workflow_options",
        opt={"permission": Permission.WORKFLOW_LIST},
    )
    async def workflow_options(
        self,
        request: Request,
        db: DbSession,
        principal: CurrentPrincipal,
        q: FromQuery[str] = "",
        exclude: FromQuery[uuid.UUID | None] = None,
        selected: FromQuery[str] = "",
    ) -> Response[str]:
        """``<li role="option">`` per workflow the user may run whose name or description
        contains ``q`` (not archived, not ``exclude``, by name, at most 50); ``selected``
        marks the current choice. A search matching nothing answers one explanatory item."""
        options = await workflow_picker.runnable_workflows(db, principal, q[:200], exclude=exclude)
        html = ENV.get_template("fragments/workflow_options.html").render(
            options=options, query=q, selected=selected
        )
        return Response(html, media_type=MediaType.HTML)
