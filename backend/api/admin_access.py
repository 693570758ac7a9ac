"""``/api/admin/groups`` and ``/api/admin/projects``: groups of users and projects (folders
of workflows and credentials) with their grants. Admin only (``groups:manage``,
``projects:manage``). Errors: 400 ``{"detail", "field"}``, 404 for unknown ids.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import msgspec
from litestar import Controller, Request, delete, get, post, put
from litestar.exceptions import NotFoundException
from litestar.params import FromPath, JSONBody

from backend.api.grant_schemas import GrantIn, GrantOut, set_grant_out
from backend.api.list_schemas import GrantList, grant_list
from backend.api.lists import DEFAULT_LIMIT, Cursor, Limit, ListPage, listed
from backend.api.schemas import Name
from backend.auth.policy import Permission
from backend.services.identity import grants, groups
from backend.services.workflows import projects
from backend.web.authentication import CurrentUser, DbSession
from backend.web.guards import access_dependencies

GROUPS = {"permission": Permission.GROUPS_MANAGE}
PROJECTS = {"permission": Permission.PROJECTS_MANAGE}


class NamedIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST: a name and an optional description."""

    name: Name
    description: str = ""


class GroupOut(msgspec.Struct):
    """A group and its members (user ids and emails)."""

    id: str
    name: str
    description: str
    members: list[dict[str, str]]


class GroupList(ListPage):
    """A page of groups, by name."""

    data: list[GroupOut]


class ProjectOut(msgspec.Struct):
    """A project and what it holds (``{"id", "name"}`` of workflows and credentials)."""

    id: str
    name: str
    description: str
    workflows: list[dict[str, str]]
    credentials: list[dict[str, str]]


class ProjectList(ListPage):
    """A page of projects, by name."""

    data: list[ProjectOut]


class MoveIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST /api/admin/projects/move: put an object into a project (or none)."""

    object_type: Literal["workflow", "credential"]
    object_id: uuid.UUID
    project_id: uuid.UUID | None = None


def _pairs(items: list[tuple[str, str]], key: str = "name") -> list[dict[str, str]]:
    return [{"id": i, key: n} for i, n in items]


class GroupController(Controller):
    """Groups and their members."""

    path = "/api/v1/admin/groups"
    tags = ["admin"]
    dependencies = access_dependencies()

    @get("/", operation_id="list_groups", opt=GROUPS)
    async def list_groups(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> GroupList:
        """Every group with its members, by name."""
        found = [
            GroupOut(g.id, g.name, g.description, _pairs(g.members, "email"))
            for g in await groups.list_groups(db)
        ]
        return listed(
            request,
            GroupList,
            found,
            lambda g: (g.name, g.id),
            tuple[str, str],
            cursor=cursor,
            limit=limit,
        )

    @post("/", operation_id="create_group", opt=GROUPS)
    async def create_group(self, db: DbSession, data: JSONBody[NamedIn]) -> GroupOut:
        """Create a group (201); 400 for an empty or taken name."""
        row = await groups.create_group(db, data.name, data.description)
        return GroupOut(str(row.id), row.name, row.description, [])

    @delete("/{group_id:uuid}", operation_id="delete_group", opt=GROUPS)
    async def delete_group(self, db: DbSession, group_id: FromPath[uuid.UUID]) -> None:
        """Delete a group with its memberships and grants (204)."""
        await groups.delete_group(db, group_id)

    @put(
        "/{group_id:uuid}/members/{user_id:uuid}",
        operation_id="add_group_member",
        opt=GROUPS,
        status_code=204,
    )
    async def add_member(
        self, db: DbSession, group_id: FromPath[uuid.UUID], user_id: FromPath[uuid.UUID]
    ) -> None:
        """Add a user to the group (idempotent)."""
        await groups.add_member(db, group_id, user_id)

    @delete(
        "/{group_id:uuid}/members/{user_id:uuid}", operation_id="remove_group_member", opt=GROUPS
    )
    async def remove_member(
        self, db: DbSession, group_id: FromPath[uuid.UUID], user_id: FromPath[uuid.UUID]
    ) -> None:
        """Remove a user from the group (204; 404 when not a member)."""
        if not await groups.remove_member(db, group_id, user_id):
            raise NotFoundException("not a member of this group")


class ProjectController(Controller):
    """Projects, their contents and their grants."""

    path = "/api/v1/admin/projects"
    tags = ["admin"]
    dependencies = access_dependencies()

    @get("/", operation_id="list_projects", opt=PROJECTS)
    async def list_projects(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> ProjectList:
        """Every project with its workflows and credentials."""
        found = [
            ProjectOut(p.id, p.name, p.description, _pairs(p.workflows), _pairs(p.credentials))
            for p in await projects.list_projects(db)
        ]
        return listed(
            request,
            ProjectList,
            found,
            lambda p: (p.name, p.id),
            tuple[str, str],
            cursor=cursor,
            limit=limit,
        )

    @post("/", operation_id="create_project", opt=PROJECTS)
    async def create_project(
        self, db: DbSession, user: CurrentUser, data: JSONBody[NamedIn]
    ) -> ProjectOut:
        """Create a project (201); 400 for an empty or taken name."""
        row = await projects.create_project(db, data.name, data.description, actor_id=user.id)
        return ProjectOut(str(row.id), row.name, row.description, [], [])

    @delete("/{project_id:uuid}", operation_id="delete_project", opt=PROJECTS)
    async def delete_project(self, db: DbSession, project_id: FromPath[uuid.UUID]) -> None:
        """Delete a project and its grants; what it held stays, outside any project (204)."""
        await projects.delete_project(db, project_id)

    @post("/move", operation_id="move_to_project", opt=PROJECTS, status_code=204)
    async def move(self, db: DbSession, data: JSONBody[MoveIn]) -> None:
        """Put a workflow or credential into a project (``project_id`` null: out of any)."""
        await projects.move(db, data.object_type, data.object_id, data.project_id)

    @get("/{project_id:uuid}/grants", operation_id="list_project_grants", opt=PROJECTS)
    async def list_grants(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        project_id: FromPath[uuid.UUID],
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> GrantList:
        """The grants on a project."""
        await projects.get_project(db, project_id)
        return await grant_list(request, db, "project", project_id, cursor=cursor, limit=limit)

    @post("/{project_id:uuid}/grants", operation_id="set_project_grant", opt=PROJECTS)
    async def set_grant(
        self,
        db: DbSession,
        user: CurrentUser,
        project_id: FromPath[uuid.UUID],
        data: JSONBody[GrantIn],
    ) -> GrantOut:
        """Grant a user or group a level on the project (201; replaces its previous level)."""
        return await set_grant_out(db, "project", project_id, data, user)

    @delete(
        "/{project_id:uuid}/grants/{grant_id:uuid}",
        operation_id="delete_project_grant",
        opt=PROJECTS,
    )
    async def delete_grant(
        self, db: DbSession, project_id: FromPath[uuid.UUID], grant_id: FromPath[uuid.UUID]
    ) -> None:
        """Revoke a grant on the project (204; 404 when not there)."""
        if not await grants.delete_grant(db, grant_id, "project", project_id):
            raise NotFoundException("no such grant on this project")
