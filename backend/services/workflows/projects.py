"""Projects: folders grouping workflows and credentials. A grant on a project reaches
everything in it (:mod:`backend.services.identity.access`). Audited: ``project.create``,
``project.update``, ``project.delete``, ``project.move`` (a workflow or credential put into
or taken out of a project).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Credential, Project, Workflow
from backend.services import audit
from backend.services.identity import grants
from backend.services.identity.naming import add_unique, clean_name


class ProjectNotFound(LookupError):
    """No project (or workflow/credential to move) with that id."""


@dataclass(frozen=True)
class ProjectView:
    """A project with the workflows and credentials in it (``(id, name)`` pairs)."""

    id: str
    name: str
    description: str
    workflows: list[tuple[str, str]]
    credentials: list[tuple[str, str]]


async def create_project(
    session: AsyncSession, name: str, description: str = "", *, actor_id: uuid.UUID | None
) -> Project:
    """Create a project; raises :class:`~backend.services.identity.naming.InvalidName`."""
    row = Project(name=clean_name(name), description=description.strip(), created_by=actor_id)
    await add_unique(session, row, f"a project named {row.name!r} exists already")
    await audit.record(session, "project.create", "project", row.id, after={"name": row.name})
    return row


async def get_project(session: AsyncSession, project_id: uuid.UUID) -> Project:
    """The project; raises :class:`ProjectNotFound`."""
    row = await session.get(Project, project_id)
    if row is None:
        raise ProjectNotFound(f"project {project_id} not found")
    return row


async def delete_project(session: AsyncSession, project_id: uuid.UUID) -> None:
    """Delete a project and its grants; its workflows and credentials stay, outside any
    project."""
    row = await get_project(session, project_id)
    before = {"name": row.name}
    await grants.delete_object_grants(session, "project", project_id)
    await session.delete(row)
    await session.flush()
    await audit.record(session, "project.delete", "project", project_id, before=before)


async def move(
    session: AsyncSession, object_type: str, object_id: uuid.UUID, project_id: uuid.UUID | None
) -> None:
    """Put a workflow or credential into ``project_id`` (None: out of any project)."""
    row: Workflow | Credential | None = await session.get(
        Workflow if object_type == "workflow" else Credential, object_id
    )
    if row is None:
        raise ProjectNotFound(f"{object_type} {object_id} not found")
    if project_id is not None:
        await get_project(session, project_id)
    before = str(row.project_id) if row.project_id else None
    row.project_id = project_id
    await session.flush()
    await audit.record(
        session,
        "project.move",
        object_type,
        object_id,
        before={"project_id": before},
        after={"project_id": str(project_id) if project_id else None},
    )


async def list_projects(session: AsyncSession) -> list[ProjectView]:
    """Every project with its workflows and credentials, by name."""
    projects = list((await session.execute(select(Project).order_by(Project.name))).scalars())
    workflows = await session.execute(
        select(Workflow.project_id, Workflow.id, Workflow.name)
        .where(Workflow.project_id.is_not(None))
        .order_by(Workflow.name)
    )
    credentials = await session.execute(
        select(Credential.project_id, Credential.id, Credential.name)
        .where(Credential.project_id.is_not(None))
        .order_by(Credential.name)
    )
    wf: dict[uuid.UUID | None, list[tuple[str, str]]] = {}
    for pid, oid, name in workflows:
        wf.setdefault(pid, []).append((str(oid), name))
    cr: dict[uuid.UUID | None, list[tuple[str, str]]] = {}
    for pid, oid, name in credentials:
        cr.setdefault(pid, []).append((str(oid), name))
    return [
        ProjectView(str(p.id), p.name, p.description, wf.get(p.id, []), cr.get(p.id, []))
        for p in projects
    ]


async def count_projects(session: AsyncSession) -> int:
    """Number of projects."""
    return int((await session.execute(select(func.count(Project.id)))).scalar_one())


async def all_objects(session: AsyncSession) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Every workflow and credential as ``(id, name)`` (for the move pickers)."""
    wfs = await session.execute(select(Workflow.id, Workflow.name).order_by(Workflow.name))
    crs = await session.execute(select(Credential.id, Credential.name).order_by(Credential.name))
    return (
        [(str(i), n) for i, n in wfs],
        [(str(i), n) for i, n in crs],
    )
