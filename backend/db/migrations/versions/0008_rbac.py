"""rbac: projects, groups, grants, service accounts, API token scopes and expiry

Revision ID: 0008_rbac
Revises: 0012_graph_v2
Create Date: 2026-12-01 08:00:00
"""

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008_rbac"
down_revision = "0012_graph_v2"
branch_labels = None
depends_on = None


def _stamp() -> sa.Column:
    return sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now())


def _fk(name: str, table: str, ondelete: str, **kw: Any) -> sa.Column:
    return sa.Column(
        name, postgresql.UUID(as_uuid=True), sa.ForeignKey(f"{table}.id", ondelete=ondelete), **kw
    )


def upgrade() -> None:
    op.create_table(
        "projects",
        sa.Column("id", postgresql.UUID(as_uuid=True), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("description", sa.Text(), nullable=False, server_default=""),
        _fk("created_by", "users", "SET NULL", nullable=True),
        _stamp(),
    )
    op.create_table(
        "groups",
        sa.Column("id", postgresql.UUID(as_uuid=True), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("description", sa.Text(), nullable=False, server_default=""),
        _stamp(),
    )
    op.create_table(
        "group_members",
        _fk("group_id", "groups", "CASCADE", primary_key=True),
        _fk("user_id", "users", "CASCADE", primary_key=True),
    )
    op.create_index("ix_group_members_user_id", "group_members", ["user_id"])
    op.create_table(
        "grants",
        sa.Column("id", postgresql.UUID(as_uuid=True), primary_key=True),
        sa.Column("object_type", sa.String(20), nullable=False),
        sa.Column("object_id", postgresql.UUID(as_uuid=True), nullable=False),
        _fk("user_id", "users", "CASCADE", nullable=True),
        _fk("group_id", "groups", "CASCADE", nullable=True),
        sa.Column("level", sa.String(10), nullable=False),
        _fk("created_by", "users", "SET NULL", nullable=True),
        _stamp(),
        sa.CheckConstraint("(user_id is null) <> (group_id is null)", name="ck_grants_subject"),
    )
    op.create_index("ix_grants_object", "grants", ["object_type", "object_id"])
    op.create_index("ix_grants_user_id", "grants", ["user_id"])
    op.create_index("ix_grants_group_id", "grants", ["group_id"])
    op.create_index(
        "uq_grants_user",
        "grants",
        ["object_type", "object_id", "user_id"],
        unique=True,
        postgresql_where=sa.text("user_id is not null"),
    )
    op.create_index(
        "uq_grants_group",
        "grants",
        ["object_type", "object_id", "group_id"],
        unique=True,
        postgresql_where=sa.text("group_id is not null"),
    )
    for table in ("workflows", "credentials"):
        op.add_column(
            table,
            _fk("project_id", "projects", "SET NULL", nullable=True),
        )
        op.create_index(f"ix_{table}_project_id", table, ["project_id"])
    op.add_column("users", sa.Column("kind", sa.String(10), nullable=False, server_default="human"))
    op.add_column(
        "api_tokens",
        sa.Column(
            "scopes",
            postgresql.JSONB(),
            nullable=False,
            server_default=sa.text("'[\"admin\"]'::jsonb"),
        ),
    )
    op.add_column("api_tokens", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("api_tokens", "expires_at")
    op.drop_column("api_tokens", "scopes")
    op.drop_column("users", "kind")
    for table in ("credentials", "workflows"):
        op.drop_index(f"ix_{table}_project_id", table_name=table)
        op.drop_column(table, "project_id")
    op.drop_table("grants")
    op.drop_table("group_members")
    op.drop_table("groups")
    op.drop_table("projects")
