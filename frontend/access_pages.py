"""Access pages of one workflow (``/workflows/{id}/access``, needs ``workflow:manage``) and
one credential (``/credentials/{id}/access``, needs ``credential:manage``): the grants on it,
a form to grant a user or group a level, and Revoke buttons."""

from __future__ import annotations

import uuid
from typing import Any

from litestar import Request, Response, get, post
from litestar.params import FromPath, URLEncodedBody
from litestar.response import Redirect

from backend.auth.policy import Permission
from backend.services.identity import grants
from backend.web.authentication import DbSession
from frontend.rendering import LoginRequiredPages, render

WF = {"permission": Permission.WORKFLOW_MANAGE}
CRED = {"permission": Permission.CREDENTIAL_MANAGE}


async def _page(
    request: Request[Any, Any, Any],
    db: DbSession,
    object_type: str,
    object_id: uuid.UUID,
    error: str | None = None,
) -> Response[str]:
    summary = await grants.object_summary(db, object_type, object_id)
    base = "/workflows" if object_type == "workflow" else "/credentials"
    return render(
        request,
        "access.html",
        status_code=400 if error else 200,
        object_kind=object_type,
        object_name=summary.name,
        owner=summary.owner,
        project=summary.project,
        grants=await grants.list_grants(db, object_type, object_id),
        subjects=await grants.subjects(db),
        levels=grants.levels_for(object_type),
        action=f"{base}/{object_id}/access",
        back=f"/workflows/{object_id}/designer" if object_type == "workflow" else "/credentials",
        error=error,
    )


async def _grant(
    request: Request[Any, Any, Any],
    db: DbSession,
    object_type: str,
    object_id: uuid.UUID,
    data: dict[str, str],
) -> Response[Any]:
    user = request.scope["state"]["user"]
    try:
        await grants.set_grant(
            db,
            object_type,
            object_id,
            data.get("subject", ""),
            data.get("level", ""),
            actor_id=user.id,
        )
    except (grants.GrantError, grants.GrantNotFound) as exc:
        return await _page(request, db, object_type, object_id, str(exc))
    base = "/workflows" if object_type == "workflow" else "/credentials"
    return Redirect(f"{base}/{object_id}/access")


class AccessPages(LoginRequiredPages):
    """Grants panels of workflows and credentials."""

    @get("/workflows/{workflow_id:uuid}/access", operation_id="page_workflow_access", opt=WF)
    async def workflow_access(
        self, request: Request[Any, Any, Any], db: DbSession, workflow_id: FromPath[uuid.UUID]
    ) -> Response[str]:
        """Who may read, run, edit or manage the workflow."""
        return await _page(request, db, "workflow", workflow_id)

    @post("/workflows/{workflow_id:uuid}/access", operation_id="page_set_workflow_grant", opt=WF)
    async def workflow_grant(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        workflow_id: FromPath[uuid.UUID],
        data: URLEncodedBody[dict[str, str]],
    ) -> Response[Any]:
        """Grant a user or group a level on the workflow."""
        return await _grant(request, db, "workflow", workflow_id, data)

    @post(
        "/workflows/{workflow_id:uuid}/access/{grant_id:uuid}/delete",
        operation_id="page_delete_workflow_grant",
        opt=WF,
    )
    async def workflow_revoke(
        self, db: DbSession, workflow_id: FromPath[uuid.UUID], grant_id: FromPath[uuid.UUID]
    ) -> Redirect:
        """Revoke a grant on the workflow."""
        await grants.delete_grant(db, grant_id, "workflow", workflow_id)
        return Redirect(f"/workflows/{workflow_id}/access")

    @get(
        "/credentials/{credential_id:uuid}/access", operation_id="page_credential_access", opt=CRED
    )
    async def credential_access(
        self, request: Request[Any, Any, Any], db: DbSession, credential_id: FromPath[uuid.UUID]
    ) -> Response[str]:
        """Who may use or manage the credential."""
        return await _page(request, db, "credential", credential_id)

    @post(
        "/credentials/{credential_id:uuid}/access",
        operation_id="page_set_credential_grant",
        opt=CRED,
    )
    async def credential_grant(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        credential_id: FromPath[uuid.UUID],
        data: URLEncodedBody[dict[str, str]],
    ) -> Response[Any]:
        """Grant a user or group ``use`` or ``manage`` on the credential."""
        return await _grant(request, db, "credential", credential_id, data)

    @post(
        "/credentials/{credential_id:uuid}/access/{grant_id:uuid}/delete",
        operation_id="page_delete_credential_grant",
        opt=CRED,
    )
    async def credential_revoke(
        self, db: DbSession, credential_id: FromPath[uuid.UUID], grant_id: FromPath[uuid.UUID]
    ) -> Redirect:
        """Revoke a grant on the credential."""
        await grants.delete_grant(db, grant_id, "credential", credential_id)
        return Redirect(f"/credentials/{credential_id}/access")
