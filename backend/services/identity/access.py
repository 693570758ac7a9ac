"""The database side of authorization: who the caller is (:class:`Principal`), the facts
about an object (:class:`ObjectAccess`), and list filters, all for
:mod:`backend.auth.policy` to decide on.

Grants on a project reach its workflows at the project grant's level, and its
credentials at ``use`` (project ``edit``) or ``manage`` (project ``manage``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, false, or_, select, true
from sqlalchemy.ext.asyncio import AsyncSession

from backend.auth.policy import (
    CREDENTIAL_LEVELS,
    ROLE_CEILING,
    WORKFLOW_LEVELS,
    Grant,
    Level,
    ObjectAccess,
    ObjectKind,
    Principal,
    object_level,
    parse_role,
    parse_scopes,
)
from backend.db.models import Credential, GroupMember, Run, StoredFile, Workflow
from backend.db.models import Grant as GrantRow
from backend.db.models import Group as GroupRow
from backend.services.identity.identity import Account


async def principal_for(
    session: AsyncSession, user: Account, scopes: Iterable[str] | None = None
) -> Principal:
    """The :class:`Principal` of ``user``: role, groups, and the token's ``scopes`` (None for
    a login session).

    A user belongs to the groups an admin added them to and, for single sign-on accounts,
    to every Railyard group whose name equals one of the group names the identity provider
    claimed at the last sign-in (``users.external_groups``, docs/security.md, "Single
    sign-on"): membership follows the provider without anyone editing it here.
    """
    member_of = select(GroupMember.group_id).where(GroupMember.user_id == user.id)
    claimed = [g for g in (user.external_groups or []) if isinstance(g, str)]
    query = (
        member_of.union(select(GroupRow.id).where(GroupRow.name.in_(claimed)))
        if claimed
        else member_of
    )
    groups = await session.execute(query)
    return Principal(
        user_id=str(user.id),
        role=parse_role(user.role),
        group_ids=frozenset(str(g) for g in groups.scalars()),
        scopes=None if scopes is None else parse_scopes(scopes),
    )


def _uuid(value: Any) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def _policy_grant(row: GrantRow, level: Level) -> Grant:
    return Grant(
        level=level,
        user_id=str(row.user_id) if row.user_id else None,
        group_id=str(row.group_id) if row.group_id else None,
    )


async def _grants(
    session: AsyncSession, targets: list[tuple[str, uuid.UUID | None]]
) -> list[GrantRow]:
    clauses = [
        (GrantRow.object_type == kind) & (GrantRow.object_id == oid)
        for kind, oid in targets
        if oid is not None
    ]
    if not clauses:
        return []
    return list((await session.execute(select(GrantRow).where(or_(*clauses)))).scalars())


def _project_credential_level(level: Level) -> Level:
    """What a project grant gives on the project's credentials (edit: use, manage: manage)."""
    if level >= Level.MANAGE:
        return Level.MANAGE
    return Level.READ if level >= Level.EDIT else Level.NONE


async def workflow_access(session: AsyncSession, workflow_id: Any) -> ObjectAccess | None:
    """Owner and grants (on the workflow and its project) of a workflow; None if unknown."""
    wid = _uuid(workflow_id)
    wf = await session.get(Workflow, wid) if wid else None
    if wf is None:
        return None
    return await access_of_workflow(session, wf)


async def access_of_workflow(session: AsyncSession, wf: Workflow) -> ObjectAccess:
    """:class:`ObjectAccess` of a loaded workflow."""
    rows = await _grants(session, [("workflow", wf.id), ("project", wf.project_id)])
    grants = tuple(_policy_grant(r, WORKFLOW_LEVELS.get(r.level, Level.NONE)) for r in rows)
    return ObjectAccess(ObjectKind.WORKFLOW, str(wf.owner_id) if wf.owner_id else None, grants)


async def credential_access(session: AsyncSession, credential_id: Any) -> ObjectAccess | None:
    """Owner (creator) and grants (on the credential and its project); None if unknown."""
    cid = _uuid(credential_id)
    row = await session.get(Credential, cid) if cid else None
    if row is None:
        return None
    rows = await _grants(session, [("credential", row.id), ("project", row.project_id)])
    grants = tuple(
        _policy_grant(
            r,
            CREDENTIAL_LEVELS.get(r.level, Level.NONE)
            if r.object_type == "credential"
            else _project_credential_level(WORKFLOW_LEVELS.get(r.level, Level.NONE)),
        )
        for r in rows
    )
    owner = str(row.created_by) if row.created_by else None
    return ObjectAccess(ObjectKind.CREDENTIAL, owner, grants)


async def run_workflow_id(session: AsyncSession, run_id: Any) -> uuid.UUID | None:
    """The workflow of a run (None when the run does not exist)."""
    rid = _uuid(run_id)
    if rid is None:
        return None
    found = await session.execute(select(Run.workflow_id).where(Run.id == rid))
    return found.scalar_one_or_none()


async def file_workflow_id(session: AsyncSession, file_id: Any) -> uuid.UUID | None:
    """The workflow whose webhook received a stored file (None when unknown)."""
    fid = _uuid(file_id)
    if fid is None:
        return None
    found = await session.execute(select(StoredFile.workflow_id).where(StoredFile.id == fid))
    return found.scalar_one_or_none()


async def _subject_grants(session: AsyncSession, principal: Principal) -> list[GrantRow]:
    subjects: list[ColumnElement[bool]] = [GrantRow.user_id == _uuid(principal.user_id)]
    group_ids = [g for g in (_uuid(x) for x in principal.group_ids) if g is not None]
    if group_ids:
        subjects.append(GrantRow.group_id.in_(group_ids))
    return list((await session.execute(select(GrantRow).where(or_(*subjects)))).scalars())


def _reach(principal: Principal, minimum: Level) -> bool:
    """Whether the principal's role ceiling and token allow ``minimum`` at all."""
    return min(ROLE_CEILING[principal.role], principal.token_level()) >= minimum


async def workflow_filter(
    session: AsyncSession, principal: Principal, minimum: Level = Level.READ
) -> ColumnElement[bool]:
    """A WHERE clause over ``Workflow`` keeping what the principal holds at ``minimum``
    (the same rule as :func:`backend.auth.policy.object_level`)."""
    if not _reach(principal, minimum):
        return false()
    if principal.is_admin:
        return true()
    rows = await _subject_grants(session, principal)
    workflows = {r.object_id for r in rows if r.object_type == "workflow" and _at(r, minimum)}
    projects = {r.object_id for r in rows if r.object_type == "project" and _at(r, minimum)}
    clauses: list[ColumnElement[bool]] = [Workflow.owner_id == _uuid(principal.user_id)]
    if workflows:
        clauses.append(Workflow.id.in_(workflows))
    if projects:
        clauses.append(Workflow.project_id.in_(projects))
    return or_(*clauses)


def _at(row: GrantRow, minimum: Level) -> bool:
    return WORKFLOW_LEVELS.get(row.level, Level.NONE) >= minimum


async def credential_filter(
    session: AsyncSession, principal: Principal, minimum: Level = Level.READ
) -> ColumnElement[bool]:
    """A WHERE clause over ``Credential`` keeping what the principal may use (``READ``) or
    manage (``MANAGE``)."""
    if not _reach(principal, minimum):
        return false()
    if principal.is_admin:
        return true()
    rows = await _subject_grants(session, principal)
    direct = {
        r.object_id
        for r in rows
        if r.object_type == "credential" and CREDENTIAL_LEVELS.get(r.level, Level.NONE) >= minimum
    }
    projects = {
        r.object_id
        for r in rows
        if r.object_type == "project"
        and _project_credential_level(WORKFLOW_LEVELS.get(r.level, Level.NONE)) >= minimum
    }
    clauses: list[ColumnElement[bool]] = [Credential.created_by == _uuid(principal.user_id)]
    if direct:
        clauses.append(Credential.id.in_(direct))
    if projects:
        clauses.append(Credential.project_id.in_(projects))
    return or_(*clauses)


async def workflow_level(session: AsyncSession, principal: Principal, wf: Workflow) -> Level:
    """The principal's effective level on a loaded workflow (for showing buttons)."""
    return object_level(principal, await access_of_workflow(session, wf))
