"""Groups of users: create, rename, delete, members. Every change is audited
(``group.create``, ``group.update``, ``group.delete``, ``group.member_add``,
``group.member_remove``). Grants to a group reach its members (:mod:`backend.auth.policy`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Group, GroupMember, User
from backend.services import audit
from backend.services.identity.naming import InvalidName, add_unique, clean_name

__all__ = ["GroupNotFound", "GroupView", "InvalidName", "add_member", "create_group"]


class GroupNotFound(LookupError):
    """No group (or user) with that id."""


@dataclass(frozen=True)
class GroupView:
    """A group with its members (``(user id, email)`` pairs, by email)."""

    id: str
    name: str
    description: str
    members: list[tuple[str, str]]


async def _get(session: AsyncSession, group_id: uuid.UUID) -> Group:
    row = await session.get(Group, group_id)
    if row is None:
        raise GroupNotFound(f"group {group_id} not found")
    return row


async def create_group(session: AsyncSession, name: str, description: str = "") -> Group:
    """Create a group; raises :class:`InvalidName` for an empty, long or taken name."""
    row = Group(name=clean_name(name), description=description.strip())
    await add_unique(session, row, f"a group named {row.name!r} exists already")
    await audit.record(session, "group.create", "group", row.id, after={"name": row.name})
    return row


async def delete_group(session: AsyncSession, group_id: uuid.UUID) -> None:
    """Delete a group; its memberships and grants go with it (foreign keys cascade)."""
    row = await _get(session, group_id)
    before = {"name": row.name}
    await session.delete(row)
    await session.flush()
    await audit.record(session, "group.delete", "group", group_id, before=before)


async def add_member(session: AsyncSession, group_id: uuid.UUID, user_id: uuid.UUID) -> None:
    """Add a user to a group (no-op when already a member)."""
    await _get(session, group_id)
    if await session.get(User, user_id) is None:
        raise GroupNotFound(f"user {user_id} not found")
    if await session.get(GroupMember, (group_id, user_id)) is not None:
        return
    session.add(GroupMember(group_id=group_id, user_id=user_id))
    await session.flush()
    await audit.record(
        session, "group.member_add", "group", group_id, details={"user_id": str(user_id)}
    )


async def remove_member(session: AsyncSession, group_id: uuid.UUID, user_id: uuid.UUID) -> bool:
    """Remove a user from a group; False when it was not a member."""
    result = await session.execute(
        delete(GroupMember).where(GroupMember.group_id == group_id, GroupMember.user_id == user_id)
    )
    if not result.rowcount:  # type: ignore[attr-defined]
        return False
    await audit.record(
        session, "group.member_remove", "group", group_id, details={"user_id": str(user_id)}
    )
    return True


async def list_groups(session: AsyncSession) -> list[GroupView]:
    """Every group with its members, by name."""
    groups = list((await session.execute(select(Group).order_by(Group.name))).scalars())
    members = await session.execute(
        select(GroupMember.group_id, User.id, User.email)
        .join(User, User.id == GroupMember.user_id)
        .order_by(User.email)
    )
    by_group: dict[uuid.UUID, list[tuple[str, str]]] = {}
    for gid, uid, email in members:
        by_group.setdefault(gid, []).append((str(uid), email))
    return [GroupView(str(g.id), g.name, g.description, by_group.get(g.id, [])) for g in groups]
