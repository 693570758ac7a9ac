"""Admin pages: ``/admin/groups``, ``/admin/projects`` (with project grants and moving
workflows and credentials between projects) and ``/admin/tokens`` (every API token,
service accounts). Each form posts to a route of its own and redirects back (or re-renders
with the error, 400). Rendered through ``backend.services`` only.
"""

from __future__ import annotations

import uuid
from typing import Any

from litestar import Request, Response, get, post
from litestar.params import FromPath, URLEncodedBody
from litestar.response import Redirect

from backend.auth.policy import Permission, Role, Scope
from backend.services.identity import api_tokens, grants, groups, service_accounts
from backend.services.identity.naming import InvalidName
from backend.services.workflows import projects
from backend.web.authentication import DbSession
from frontend.rendering import LoginRequiredPages, render
from frontend.token_forms import form_days, form_scopes

GROUPS = {"permission": Permission.GROUPS_MANAGE}
PROJECTS = {"permission": Permission.PROJECTS_MANAGE}
TOKENS = {"permission": Permission.TOKENS_MANAGE}
FORM_ERRORS = (
    InvalidName,
    grants.GrantError,
    grants.GrantNotFound,
    groups.GroupNotFound,
    projects.ProjectNotFound,
    api_tokens.TokenError,
)


def _uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


class AdminPages(LoginRequiredPages):
    """Groups, projects and all tokens (admins)."""

    async def _groups(
        self, request: Request[Any, Any, Any], db: DbSession, error: str | None = None
    ) -> Response[str]:
        users = [s for s in await grants.subjects(db) if s.key.startswith("user:")]
        return render(
            request,
            "admin_groups.html",
            status_code=400 if error else 200,
            groups=await groups.list_groups(db),
            users=users,
            error=error,
        )

    @get("/admin/groups", operation_id="page_admin_groups", opt=GROUPS)
    async def groups_page(self, request: Request[Any, Any, Any], db: DbSession) -> Response[str]:
        """Groups with their members; forms to create, delete and change members."""
        return await self._groups(request, db)

    @post("/admin/groups", operation_id="page_create_group", opt=GROUPS)
    async def create_group(
        self, request: Request[Any, Any, Any], db: DbSession, data: URLEncodedBody[dict[str, str]]
    ) -> Response[Any]:
        """Create a group from the form."""
        try:
            await groups.create_group(db, data.get("name", ""), data.get("description", ""))
        except FORM_ERRORS as exc:
            return await self._groups(request, db, str(exc))
        return Redirect("/admin/groups")

    @post("/admin/groups/{group_id:uuid}/delete", operation_id="page_delete_group", opt=GROUPS)
    async def delete_group(self, db: DbSession, group_id: FromPath[uuid.UUID]) -> Redirect:
        """Delete a group (its grants go with it)."""
        await groups.delete_group(db, group_id)
        return Redirect("/admin/groups")

    @post("/admin/groups/{group_id:uuid}/members", operation_id="page_add_group_member", opt=GROUPS)
    async def add_member(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        group_id: FromPath[uuid.UUID],
        data: URLEncodedBody[dict[str, str]],
    ) -> Response[Any]:
        """Add the chosen user to the group."""
        user_id = _uuid(data.get("user_id", ""))
        if user_id is None:
            return await self._groups(request, db, "choose a user")
        try:
            await groups.add_member(db, group_id, user_id)
        except FORM_ERRORS as exc:
            return await self._groups(request, db, str(exc))
        return Redirect(f"/admin/groups#group-{group_id}")

    @post(
        "/admin/groups/{group_id:uuid}/members/{user_id:uuid}/remove",
        operation_id="page_remove_group_member",
        opt=GROUPS,
    )
    async def remove_member(
        self, db: DbSession, group_id: FromPath[uuid.UUID], user_id: FromPath[uuid.UUID]
    ) -> Redirect:
        """Remove a user from the group."""
        await groups.remove_member(db, group_id, user_id)
        return Redirect(f"/admin/groups#group-{group_id}")

    async def _projects(
        self, request: Request[Any, Any, Any], db: DbSession, error: str | None = None
    ) -> Response[str]:
        items = await projects.list_projects(db)
        workflows, credentials = await projects.all_objects(db)
        return render(
            request,
            "admin_projects.html",
            status_code=400 if error else 200,
            projects=items,
            grants={p.id: await grants.list_grants(db, "project", uuid.UUID(p.id)) for p in items},
            subjects=await grants.subjects(db),
            levels=grants.levels_for("project"),
            all_workflows=workflows,
            all_credentials=credentials,
            error=error,
        )

    @get("/admin/projects", operation_id="page_admin_projects", opt=PROJECTS)
    async def projects_page(self, request: Request[Any, Any, Any], db: DbSession) -> Response[str]:
        """Projects, what they hold, their grants; links to every workflow's access page."""
        return await self._projects(request, db)

    @post("/admin/projects", operation_id="page_create_project", opt=PROJECTS)
    async def create_project(
        self, request: Request[Any, Any, Any], db: DbSession, data: URLEncodedBody[dict[str, str]]
    ) -> Response[Any]:
        """Create a project from the form."""
        user = request.scope["state"]["user"]
        try:
            await projects.create_project(
                db, data.get("name", ""), data.get("description", ""), actor_id=user.id
            )
        except FORM_ERRORS as exc:
            return await self._projects(request, db, str(exc))
        return Redirect("/admin/projects")

    @post(
        "/admin/projects/{project_id:uuid}/delete", operation_id="page_delete_project", opt=PROJECTS
    )
    async def delete_project(self, db: DbSession, project_id: FromPath[uuid.UUID]) -> Redirect:
        """Delete a project (what it held stays)."""
        await projects.delete_project(db, project_id)
        return Redirect("/admin/projects")

    @post("/admin/projects/move", operation_id="page_move_to_project", opt=PROJECTS)
    async def move(
        self, request: Request[Any, Any, Any], db: DbSession, data: URLEncodedBody[dict[str, str]]
    ) -> Response[Any]:
        """Put a workflow or credential (``object`` = ``workflow:<id>``) into a project."""
        kind, _, raw = data.get("object", "").partition(":")
        object_id = _uuid(raw)
        project_raw = data.get("project_id", "")
        project_id = _uuid(project_raw) if project_raw else None
        if kind not in ("workflow", "credential") or object_id is None:
            return await self._projects(request, db, "choose a workflow or credential")
        if project_raw and project_id is None:
            return await self._projects(request, db, "choose a project")
        try:
            await projects.move(db, kind, object_id, project_id)
        except FORM_ERRORS as exc:
            return await self._projects(request, db, str(exc))
        return Redirect("/admin/projects")

    @post(
        "/admin/projects/{project_id:uuid}/grants",
        operation_id="page_set_project_grant",
        opt=PROJECTS,
    )
    async def set_grant(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        project_id: FromPath[uuid.UUID],
        data: URLEncodedBody[dict[str, str]],
    ) -> Response[Any]:
        """Grant a user or group a level on the project."""
        user = request.scope["state"]["user"]
        try:
            await grants.set_grant(
                db,
                "project",
                project_id,
                data.get("subject", ""),
                data.get("level", ""),
                actor_id=user.id,
            )
        except FORM_ERRORS as exc:
            return await self._projects(request, db, str(exc))
        return Redirect(f"/admin/projects#project-{project_id}")

    @post(
        "/admin/projects/{project_id:uuid}/grants/{grant_id:uuid}/delete",
        operation_id="page_delete_project_grant",
        opt=PROJECTS,
    )
    async def delete_grant(
        self, db: DbSession, project_id: FromPath[uuid.UUID], grant_id: FromPath[uuid.UUID]
    ) -> Redirect:
        """Revoke a grant on the project."""
        await grants.delete_grant(db, grant_id, "project", project_id)
        return Redirect(f"/admin/projects#project-{project_id}")

    async def _tokens(
        self, request: Request[Any, Any, Any], db: DbSession, status: int = 200, **extra: Any
    ) -> Response[str]:
        return render(
            request,
            "admin_tokens.html",
            status_code=status,
            tokens=await api_tokens.list_all_tokens(db),
            accounts=await service_accounts.list_service_accounts(db),
            roles=[r.value for r in Role],
            scopes=[s.value for s in Scope],
            **extra,
        )

    @get("/admin/tokens", operation_id="page_admin_tokens", opt=TOKENS)
    async def tokens_page(self, request: Request[Any, Any, Any], db: DbSession) -> Response[str]:
        """Every API token (revoke any) and the service accounts (create, mint tokens)."""
        return await self._tokens(request, db)

    @post("/admin/tokens/{token_id:uuid}/revoke", operation_id="page_revoke_any_token", opt=TOKENS)
    async def revoke(self, db: DbSession, token_id: FromPath[uuid.UUID]) -> Redirect:
        """Revoke a token of anyone."""
        await api_tokens.revoke_token(db, None, token_id)
        return Redirect("/admin/tokens")

    @post(
        "/admin/service-accounts",
        operation_id="page_create_service_account",
        opt={"permission": Permission.USERS_MANAGE},
    )
    async def create_account(
        self, request: Request[Any, Any, Any], db: DbSession, data: URLEncodedBody[dict[str, str]]
    ) -> Response[Any]:
        """Create a service account from the form."""
        try:
            await service_accounts.create_service_account(
                db, data.get("name", ""), data.get("role", "operator")
            )
        except FORM_ERRORS as exc:
            return await self._tokens(request, db, 400, error=str(exc))
        return Redirect("/admin/tokens")

    @post(
        "/admin/service-accounts/{user_id:uuid}/tokens",
        operation_id="page_create_service_account_token",
        opt=TOKENS,
    )
    async def create_account_token(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        user_id: FromPath[uuid.UUID],
        data: URLEncodedBody[dict[str, str]],
    ) -> Response[Any]:
        """Mint a token for a service account and show its text once."""
        account = await service_accounts.get_service_account(db, user_id)
        if account is None:
            return await self._tokens(request, db, 404, error="no such service account")
        try:
            _, token = await api_tokens.create_for(
                db,
                account,
                data.get("name", ""),
                form_scopes(data),
                form_days(data.get("expires_in_days", "")),
            )
        except FORM_ERRORS as exc:
            return await self._tokens(request, db, 400, error=str(exc))
        return await self._tokens(request, db, 201, new_token=token, new_token_owner=account.email)
