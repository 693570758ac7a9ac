"""Version pages of one workflow: the history (``/workflows/{id}/versions``: every published
version with publisher, time and note; export, copy, import into the draft, restore) and
the visual diff (``/workflows/{id}/compare?from=&to=``: both diagrams with added, removed
and changed nodes and edges highlighted, config changes field by field). Both need
``workflow:read``; restoring and importing need ``edit`` and are offered only then."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import msgspec
from litestar import Request, Response, get
from litestar.params import FromPath, QueryParameter

from backend.auth.policy import Level, Permission
from backend.services.errors import InvalidInput
from backend.services.identity import access
from backend.services.workflows import workflow_versions, workflows
from backend.web.authentication import AppRuntime, DbSession
from backend.web.guards import CurrentPrincipal
from frontend.diagram_catalog import catalog_json_for
from frontend.pages import LoginRequiredPages, render

READ = {"permission": Permission.WORKFLOW_READ}


def _label(ref: int | str) -> str:
    return "Draft" if ref == workflow_versions.DRAFT else f"Version {ref}"


def _error(request: Request[Any, Any, Any], exc: Exception) -> Response[str]:
    code = 404 if isinstance(exc, workflows.WorkflowNotFound) else 400
    return render(request, "error.html", status_code=code, status_code_=code, message=str(exc))


class VersionPages(LoginRequiredPages):
    """Version history and the diff view."""

    @get("/workflows/{workflow_id:uuid}/versions", operation_id="page_versions", opt=READ)
    async def versions(
        self,
        request: Request[Any, Any, Any],
        workflow_id: FromPath[uuid.UUID],
        db: DbSession,
        principal: CurrentPrincipal,
    ) -> Response[str]:
        """The history of published versions, newest first, with the draft on top."""
        try:
            wf = await workflows.get_workflow(db, workflow_id)
        except workflows.WorkflowNotFound as exc:
            return _error(request, exc)
        level = await access.workflow_level(db, principal, wf)
        return render(
            request,
            "versions.html",
            workflow={"id": str(wf.id), "name": wf.name, "active_version": wf.active_version},
            draft=await workflow_versions.draft_info(db, wf),
            versions=await workflow_versions.history(db, workflow_id),
            can_edit=level >= Level.EDIT,
        )

    @get("/workflows/{workflow_id:uuid}/compare", operation_id="page_compare", opt=READ)
    async def compare(
        self,
        request: Request[Any, Any, Any],
        workflow_id: FromPath[uuid.UUID],
        db: DbSession,
        runtime: AppRuntime,
        from_ref: Annotated[str | None, QueryParameter(name="from")] = None,
        to_ref: Annotated[str | None, QueryParameter(name="to")] = None,
    ) -> Response[str]:
        """Two diagrams side by side, what changed highlighted on both, and the list of
        changes (defaults: the active version against the draft)."""
        try:
            wf = await workflows.get_workflow(db, workflow_id)
            if from_ref is None:
                from_ref = str(wf.active_version or workflow_versions.DRAFT)
            before = workflow_versions.parse_ref(from_ref, "from")
            after = workflow_versions.parse_ref(to_ref or workflow_versions.DRAFT, "to")
            result = await workflow_versions.compare(db, workflow_id, before, after)
        except (workflows.WorkflowNotFound, InvalidInput) as exc:
            return _error(request, exc)
        return render(
            request,
            "version_diff.html",
            workflow={"id": str(wf.id), "name": wf.name, "active_version": wf.active_version},
            versions=await workflow_versions.history(db, workflow_id),
            before_ref=before,
            after_ref=after,
            before_label=_label(before),
            after_label=_label(after),
            diff=result.diff,
            summary=result.diff.summary(),
            before_json=msgspec.json.encode(result.before).decode(),
            after_json=msgspec.json.encode(result.after).decode(),
            diff_json=msgspec.json.encode(result.diff).decode(),
            catalog_json=catalog_json_for(runtime.catalog, result.before, result.after),
            type_labels={spec.type: spec.label for spec in runtime.catalog.all()},
        )
