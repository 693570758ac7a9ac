"""Access control tables: projects (folders of workflows and credentials), groups of users,
group membership and grants. What the levels mean is :mod:`backend.auth.policy`'s.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import CheckConstraint, DateTime, ForeignKey, Index, String, Text, func
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base, _uuid

__all__ = ["Grant", "Group", "GroupMember", "Project"]


class Project(Base):
    """A folder grouping workflows and credentials; grants on it reach everything inside."""

    __tablename__ = "projects"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    created_by: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Group(Base):
    """A named set of users; grants to a group reach its members."""

    __tablename__ = "groups"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class GroupMember(Base):
    """Membership of one user in one group."""

    __tablename__ = "group_members"

    group_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("groups.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True, index=True
    )


class Grant(Base):
    """A level (``read``/``run``/``edit``/``manage`` on projects and workflows, ``use``/
    ``manage`` on credentials) on one object for one user or one group (exactly one)."""

    __tablename__ = "grants"
    __table_args__ = (
        CheckConstraint("(user_id is null) <> (group_id is null)", name="ck_grants_subject"),
        Index("ix_grants_object", "object_type", "object_id"),
        Index(
            "uq_grants_user",
            "object_type",
            "object_id",
            "user_id",
            unique=True,
            postgresql_where="user_id is not null",
        ),
        Index(
            "uq_grants_group",
            "object_type",
            "object_id",
            "group_id",
            unique=True,
            postgresql_where="group_id is not null",
        ),
    )

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    object_type: Mapped[str] = mapped_column(String(20))  # project | workflow | credential
    object_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    user_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), nullable=True, index=True
    )
    group_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("groups.id", ondelete="CASCADE"), nullable=True, index=True
    )
    level: Mapped[str] = mapped_column(String(10))
    created_by: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
