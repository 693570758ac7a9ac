"""Wire types of grants, shared by the grant and project controllers."""

from __future__ import annotations

import uuid

import msgspec

from backend.services.identity import grants
from backend.web.authentication import CurrentUser, DbSession


class GrantIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST .../grants."""

    subject: str
    level: str


class GrantOut(msgspec.Struct):
    """A grant: its id, level and subject."""

    id: str
    level: str
    subject: str
    subject_label: str


class SubjectOut(msgspec.Struct):
    """A user or group that can be granted (``key`` goes into ``GrantIn.subject``)."""

    key: str
    label: str


def grant_out(g: grants.GrantView) -> GrantOut:
    """Wire form of a grant."""
    return GrantOut(g.id, g.level, f"{g.subject_type}:{g.subject_id}", g.subject_label)


async def set_grant_out(
    db: DbSession, object_type: str, object_id: uuid.UUID, data: GrantIn, user: CurrentUser
) -> GrantOut:
    """Set a grant from a request body; returns it as listed."""
    row = await grants.set_grant(
        db, object_type, object_id, data.subject, data.level, actor_id=user.id
    )
    found = await grants.list_grants(db, object_type, object_id)
    return next(grant_out(g) for g in found if g.id == str(row.id))
