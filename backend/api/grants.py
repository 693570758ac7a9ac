"""Grants on one workflow (``/api/workflows/{id}/grants``, needs ``workflow:manage``) or
one credential (``/api/credentials/{id}/grants``, needs ``credential:manage``).

A grant names a subject ``"user:<id>"`` or ``"group:<id>"`` and a level (``read``, ``run``,
``edit``, ``manage`` on workflows; ``use``, ``manage`` on credentials). Granting again
changes the level. 400 ``{"detail", "field"}`` for a bad level or subject.
"""

from __future__ import annotations

import uuid
from typing import Any

from litestar import Controller, Request, delete, get, post
from litestar.exceptions import NotFoundException
from litestar.params import FromPath, JSONBody

from backend.api.grant_schemas import GrantIn, GrantOut, SubjectOut, set_grant_out
from backend.api.list_schemas import GrantList, SubjectList, grant_list
from backend.api.lists import DEFAULT_LIMIT, Cursor, Limit, listed
from backend.auth.policy import Permission
from backend.services.identity import grants
from backend.web.authentication import CurrentUser, DbSession
from backend.web.guards import access_dependencies


class WorkflowGrantController(Controller):
    """Who may read, run, edit or manage one workflow (besides admins and its owner)."""

    path = "/api/v1/workflows/{workflow_id:uuid}/grants"
    tags = ["grants"]
    dependencies = access_dependencies()
    opt = {"permission": Permission.WORKFLOW_MANAGE}

    @get("/", operation_id="list_workflow_grants", opt=opt)
    async def list_grants(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        workflow_id: FromPath[uuid.UUID],
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> GrantList:
        """The grants on the workflow itself (project grants are on the project)."""
        return await grant_list(request, db, "workflow", workflow_id, cursor=cursor, limit=limit)

    @get("/subjects", operation_id="list_grant_subjects", opt=opt)
    async def subjects(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> SubjectList:
        """Users and groups a grant can name."""
        found = [SubjectOut(s.key, s.label) for s in await grants.subjects(db)]
        return listed(
            request,
            SubjectList,
            found,
            lambda s: (s.label, s.key),
            tuple[str, str],
            cursor=cursor,
            limit=limit,
        )

    @post("/", operation_id="set_workflow_grant", opt=opt)
    async def set_grant(
        self,
        db: DbSession,
        user: CurrentUser,
        workflow_id: FromPath[uuid.UUID],
        data: JSONBody[GrantIn],
    ) -> GrantOut:
        """Grant a level on the workflow (201)."""
        return await set_grant_out(db, "workflow", workflow_id, data, user)

    @delete("/{grant_id:uuid}", operation_id="delete_workflow_grant", opt=opt)
    async def delete_grant(
        self, db: DbSession, workflow_id: FromPath[uuid.UUID], grant_id: FromPath[uuid.UUID]
    ) -> None:
        """Revoke a grant on the workflow (204; 404 when not there)."""
        if not await grants.delete_grant(db, grant_id, "workflow", workflow_id):
            raise NotFoundException("no such grant on this workflow")


class CredentialGrantController(Controller):
    """Who may use or manage one credential (besides admins and its creator)."""

    path = "/api/v1/credentials/{credential_id:uuid}/grants"
    tags = ["grants"]
    dependencies = access_dependencies()
    opt = {"permission": Permission.CREDENTIAL_MANAGE}

    @get("/", operation_id="list_credential_grants", opt=opt)
    async def list_grants(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        credential_id: FromPath[uuid.UUID],
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> GrantList:
        """The grants on the credential."""
        return await grant_list(
            request, db, "credential", credential_id, cursor=cursor, limit=limit
        )

    @post("/", operation_id="set_credential_grant", opt=opt)
    async def set_grant(
        self,
        db: DbSession,
        user: CurrentUser,
        credential_id: FromPath[uuid.UUID],
        data: JSONBody[GrantIn],
    ) -> GrantOut:
        """Grant ``use`` or ``manage`` on the credential (201)."""
        return await set_grant_out(db, "credential", credential_id, data, user)

    @delete("/{grant_id:uuid}", operation_id="delete_credential_grant", opt=opt)
    async def delete_grant(
        self, db: DbSession, credential_id: FromPath[uuid.UUID], grant_id: FromPath[uuid.UUID]
    ) -> None:
        """Revoke a grant on the credential (204; 404 when not there)."""
        if not await grants.delete_grant(db, grant_id, "credential", credential_id):
            raise NotFoundException("no such grant on this credential")
