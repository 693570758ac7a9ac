"""The workflow list page and its actions: create, rename and describe, duplicate,
archive (the UI's "Delete") and restore. Each action is a form posting to its own route,
permission-checked like the JSON API (docs/designer.md, "Workflows")."""

from __future__ import annotations

import uuid
from typing import Any

from litestar import Request, Response, get, post
from litestar.di import Provide
from litestar.exceptions import HTTPException
from litestar.params import FromPath, FromQuery, URLEncodedBody
from litestar.response import Redirect

from backend.auth.policy import Level, Permission, allows
from backend.services.errors import InvalidInput
from backend.services.identity import access, references
from backend.services.subscriptions import manage as subscription_manage
from backend.services.triggers import webhooks
from backend.services.workflows import workflow_lifecycle, workflow_picker, workflows
from backend.web.authentication import AppRuntime, CurrentUser, DbSession, provide_user
from backend.web.guards import CurrentPrincipal
from frontend.pages import LoginRequiredPages, render, webhook_url


class WorkflowPages(LoginRequiredPages):
    """``/workflows``: the list (active or archived) and the forms acting on a workflow."""

    dependencies = {**LoginRequiredPages.dependencies, "user": Provide(provide_user)}

    @get("/workflows", operation_id="page_workflows", opt={"permission": Permission.WORKFLOW_LIST})
    async def workflows_page(
        self,
        request: Request,
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
        archived: FromQuery[bool] = False,
        notice: FromQuery[str] = "",
        workflow: FromQuery[uuid.UUID | None] = None,
    ) -> Response[str]:
        """The workflows the user may read (``?archived=true``: the archived ones), each
        with the actions the user may take on it; ``notice=archived&workflow=<id>`` says
        that workflow was just archived (with its Restore button)."""
        visible = await access.workflow_filter(db, principal)
        found = await workflows.list_workflows(db, visible, archived=archived)
        ids = [wf.id for wf in found]
        if workflow is not None:
            ids.append(workflow)
        editable = await workflow_picker.ids_at_level(db, principal, Level.EDIT, ids)
        manageable = await workflow_picker.ids_at_level(db, principal, Level.MANAGE, ids)
        items = [
            {
                "id": str(wf.id),
                "name": wf.name,
                "description": wf.description,
                "active_version": wf.active_version,
                "updated_at": wf.updated_at,
                "archived_at": wf.archived_at,
                "webhook_url": webhook_url(runtime, wf)
                if wf.active_version and not wf.archived_at
                else None,
                "can_edit": wf.id in editable,
                "can_manage": wf.id in manageable,
            }
            for wf in found
        ]
        just_archived = None
        if notice == "archived" and workflow is not None:
            names = await workflow_picker.readable_names(db, principal, [str(workflow)])
            if str(workflow) in names:
                just_archived = {
                    "id": str(workflow),
                    "name": names[str(workflow)].removesuffix(" (archived)"),
                    "can_restore": workflow in manageable,
                }
        notices = await subscription_manage.disabled_notices(db, uuid.UUID(principal.user_id))
        return render(
            request,
            "workflows.html",
            workflows=items,
            subscription_notices=notices,
            archived=archived,
            just_archived=just_archived,
            can_duplicate=allows(principal, Permission.WORKFLOW_CREATE),
        )

    @post(
        "/workflows",
        operation_id="page_create_workflow",
        opt={"permission": Permission.WORKFLOW_CREATE},
    )
    async def create_workflow(
        self, db: DbSession, user: CurrentUser, data: URLEncodedBody[dict[str, str]]
    ) -> Response[Any]:
        """Create a workflow from the form and open it in the designer."""
        try:
            wf = await workflows.create_workflow(
                db, data.get("name", ""), user.id, data.get("description", "").strip()
            )
        except InvalidInput as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        return Redirect(f"/workflows/{wf.id}/designer")

    @post(
        "/workflows/{workflow_id:uuid}/details",
        operation_id="page_workflow_details",
        opt={"permission": Permission.WORKFLOW_EDIT},
    )
    async def details(
        self,
        workflow_id: FromPath[uuid.UUID],
        db: DbSession,
        data: URLEncodedBody[dict[str, str]],
    ) -> Response[Any]:
        """Rename and re-describe (400 naming the field for an empty or too long name)."""
        try:
            await workflows.update_workflow(
                db,
                workflow_id,
                name=data.get("name", ""),
                description=data.get("description", "").strip(),
            )
        except InvalidInput as exc:
            raise HTTPException(status_code=400, detail=f"{exc.field}: {exc}") from exc
        return Redirect(_back(data.get("next"), "/workflows"))

    @post(
        "/workflows/{workflow_id:uuid}/duplicate",
        operation_id="page_duplicate_workflow",
        opt={"permission": Permission.WORKFLOW_READ},
    )
    async def duplicate(
        self,
        workflow_id: FromPath[uuid.UUID],
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
        user: CurrentUser,
    ) -> Response[Any]:
        """Copy the workflow (see ``POST /api/workflows/{id}/duplicate``) and open the copy
        in the designer; 403 without the right to create workflows or to use what it names."""
        try:
            wf = await workflow_lifecycle.duplicate_as(
                db, principal, workflow_id, user.id, runtime.catalog
            )
        except (workflow_lifecycle.CreateNotAllowed, references.ReferenceNotGranted) as exc:
            raise HTTPException(status_code=403, detail=str(exc)) from exc
        return Redirect(f"/workflows/{wf.id}/designer")

    @post(
        "/workflows/{workflow_id:uuid}/archive",
        operation_id="page_archive_workflow",
        opt={"permission": Permission.WORKFLOW_MANAGE},
    )
    async def archive(
        self, workflow_id: FromPath[uuid.UUID], db: DbSession, user: CurrentUser
    ) -> Response[Any]:
        """Archive ("Delete"): back to the list, which offers to restore it."""
        await workflow_lifecycle.archive_workflow(db, workflow_id, user.id)
        webhooks.clear_endpoint_cache()
        return Redirect(f"/workflows?notice=archived&workflow={workflow_id}")

    @post(
        "/workflows/{workflow_id:uuid}/restore",
        operation_id="page_restore_workflow",
        opt={"permission": Permission.WORKFLOW_MANAGE},
    )
    async def restore(
        self, workflow_id: FromPath[uuid.UUID], db: DbSession, runtime: AppRuntime
    ) -> Response[Any]:
        """Restore an archived workflow and return to the workflow list."""
        await workflow_lifecycle.restore_workflow(db, workflow_id, runtime.catalog.triggers)
        webhooks.clear_endpoint_cache()
        return Redirect("/workflows")


def _back(target: str | None, default: str) -> str:
    """A same-site path to return to (``default`` for anything else)."""
    if target and target.startswith("/") and not target.startswith("//"):
        return target
    return default
