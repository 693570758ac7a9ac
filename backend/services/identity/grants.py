"""Grants: a level on a project, workflow or credential for a user or a group.

Levels: ``read``, ``run``, ``edit``, ``manage`` on projects and workflows; ``use``,
``manage`` on credentials (:mod:`backend.auth.policy` says what they allow). One grant per
(object, subject): granting again changes the level. Audited as ``grant.create`` (with
``before`` when a level changed) and ``grant.delete``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.auth.policy import CREDENTIAL_LEVELS, WORKFLOW_LEVELS
from backend.db.models import Credential, Grant, Group, Project, User, Workflow
from backend.services import audit

OBJECT_TYPES = ("project", "workflow", "credential")
_MODELS: dict[str, type[Project] | type[Workflow] | type[Credential]] = {
    "project": Project,
    "workflow": Workflow,
    "credential": Credential,
}


class GrantError(ValueError):
    """Invalid grant input; ``field`` names the offending field (``level``, ``subject``)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class GrantNotFound(LookupError):
    """No such grant, object or subject."""


@dataclass(frozen=True)
class GrantView:
    """A grant as shown: id, level, and the subject's kind (``user``/``group``), id and label."""

    id: str
    level: str
    subject_type: str
    subject_id: str
    subject_label: str


@dataclass(frozen=True)
class Subject:
    """A user or group that grants can name (for pickers): ``"user:<id>"`` / ``"group:<id>"``."""

    key: str
    label: str


def levels_for(object_type: str) -> tuple[str, ...]:
    """The grantable levels of an object type, lowest first."""
    return tuple(CREDENTIAL_LEVELS if object_type == "credential" else WORKFLOW_LEVELS)


def parse_subject(key: str) -> tuple[str, uuid.UUID]:
    """``("user"|"group", id)`` from ``"user:<uuid>"``/``"group:<uuid>"``; raises
    :class:`GrantError`."""
    kind, _, raw = (key or "").partition(":")
    try:
        if kind in ("user", "group"):
            return kind, uuid.UUID(raw)
    except ValueError:
        pass
    raise GrantError("choose a user or a group", "subject")


async def _check_object(session: AsyncSession, object_type: str, object_id: uuid.UUID) -> None:
    model = _MODELS.get(object_type)
    if model is None:
        raise GrantError(f"grants apply to {', '.join(OBJECT_TYPES)}", "object_type")
    if await session.get(model, object_id) is None:
        raise GrantNotFound(f"{object_type} {object_id} not found")


def _snapshot(row: Grant) -> dict[str, str | None]:
    return {
        "object_type": row.object_type,
        "object_id": str(row.object_id),
        "user_id": str(row.user_id) if row.user_id else None,
        "group_id": str(row.group_id) if row.group_id else None,
        "level": row.level,
    }


async def set_grant(
    session: AsyncSession,
    object_type: str,
    object_id: uuid.UUID,
    subject: str,
    level: str,
    *,
    actor_id: uuid.UUID | None = None,
) -> Grant:
    """Give ``subject`` (``"user:<id>"``/``"group:<id>"``) ``level`` on the object, replacing
    its previous level there. Raises :class:`GrantError` (bad level or subject) and
    :class:`GrantNotFound` (unknown object, user or group)."""
    await _check_object(session, object_type, object_id)
    if level not in levels_for(object_type):
        allowed = ", ".join(levels_for(object_type))
        raise GrantError(f"a {object_type} grant is one of: {allowed}", "level")
    kind, subject_id = parse_subject(subject)
    if await session.get(User if kind == "user" else Group, subject_id) is None:
        raise GrantNotFound(f"{kind} {subject_id} not found")
    column = Grant.user_id if kind == "user" else Grant.group_id
    row = (
        await session.execute(
            select(Grant).where(
                Grant.object_type == object_type,
                Grant.object_id == object_id,
                column == subject_id,
            )
        )
    ).scalar_one_or_none()
    before = _snapshot(row) if row else None
    if row is None:
        row = Grant(
            object_type=object_type,
            object_id=object_id,
            user_id=subject_id if kind == "user" else None,
            group_id=subject_id if kind == "group" else None,
            level=level,
            created_by=actor_id,
        )
        session.add(row)
    row.level = level
    await session.flush()
    await audit_grant(session, "grant.create", row, before=before)
    return row


async def audit_grant(
    session: AsyncSession, action: str, row: Grant, *, before: object = None
) -> None:
    """Audit a grant change (``after`` is the grant unless it was deleted)."""
    after = None if action == "grant.delete" else _snapshot(row)
    await audit.record(session, action, "grant", row.id, before=before, after=after)


async def delete_grant(
    session: AsyncSession, grant_id: uuid.UUID, object_type: str, object_id: uuid.UUID
) -> bool:
    """Delete a grant of the given object; False when no such grant is on it."""
    row = await session.get(Grant, grant_id)
    if row is None or row.object_type != object_type or row.object_id != object_id:
        return False
    before = _snapshot(row)
    await session.delete(row)
    await session.flush()
    await audit_grant(session, "grant.delete", row, before=before)
    return True


async def delete_object_grants(
    session: AsyncSession, object_type: str, object_id: uuid.UUID
) -> None:
    """Remove every grant on an object that is being deleted."""
    await session.execute(
        delete(Grant).where(Grant.object_type == object_type, Grant.object_id == object_id)
    )


async def list_grants(
    session: AsyncSession, object_type: str, object_id: uuid.UUID
) -> list[GrantView]:
    """The grants on one object with their subjects' labels (users by email, groups by
    name), users first."""
    rows = await session.execute(
        select(Grant, User.email, Group.name)
        .outerjoin(User, User.id == Grant.user_id)
        .outerjoin(Group, Group.id == Grant.group_id)
        .where(Grant.object_type == object_type, Grant.object_id == object_id)
        .order_by(Grant.group_id.is_not(None), User.email, Group.name)
    )
    return [
        GrantView(
            id=str(g.id),
            level=g.level,
            subject_type="user" if g.user_id else "group",
            subject_id=str(g.user_id or g.group_id),
            subject_label=(email if g.user_id else name) or "?",
        )
        for g, email, name in rows
    ]


async def subjects(session: AsyncSession) -> list[Subject]:
    """Every active user (by email) and group (by name) a grant can name."""
    users = await session.execute(
        select(User.id, User.email, User.kind).where(User.is_active.is_(True)).order_by(User.email)
    )
    groups = await session.execute(select(Group.id, Group.name).order_by(Group.name))
    found = [
        Subject(f"user:{uid}", email + (" (service account)" if kind == "service" else ""))
        for uid, email, kind in users
    ]
    found += [Subject(f"group:{gid}", f"group {name}") for gid, name in groups]
    return found


@dataclass(frozen=True)
class ObjectSummary:
    """What an access page shows about its object: name, owner's email, project name."""

    name: str
    owner: str | None
    project: str | None


async def object_summary(
    session: AsyncSession, object_type: str, object_id: uuid.UUID
) -> ObjectSummary:
    """Name, owner and project of a workflow or credential; raises :class:`GrantNotFound`."""
    model = Workflow if object_type == "workflow" else Credential
    owner_column = Workflow.owner_id if object_type == "workflow" else Credential.created_by
    found = (
        await session.execute(
            select(model.name, User.email, Project.name)
            .outerjoin(User, User.id == owner_column)
            .outerjoin(Project, Project.id == model.project_id)
            .where(model.id == object_id)
        )
    ).first()
    if found is None:
        raise GrantNotFound(f"{object_type} {object_id} not found")
    return ObjectSummary(found[0], found[1], found[2])
