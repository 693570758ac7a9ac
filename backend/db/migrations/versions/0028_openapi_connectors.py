"""Imported OpenAPI connectors and their versions

Revision ID: 0028_openapi_connectors
Revises: 0027_trigger_samples
Create Date: 2026-12-05 12:00:00

An admin imports an OpenAPI document as a connector (docs/connectors.md, "OpenAPI
connectors"); each import is a version holding the document, the definition Railyard runs
and each operation's node-type version.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0028_openapi_connectors"
down_revision = "0027_trigger_samples"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "openapi_connectors",
        sa.Column("id", postgresql.UUID(as_uuid=True), primary_key=True),
        sa.Column("name", sa.String(40), nullable=False, unique=True),
        sa.Column("label", sa.String(200), nullable=False),
        sa.Column(
            "created_by",
            postgresql.UUID(as_uuid=True),
            sa.ForeignKey("users.id", ondelete="SET NULL"),
            nullable=True,
        ),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
    )
    op.create_table(
        "openapi_connector_versions",
        sa.Column("id", postgresql.UUID(as_uuid=True), primary_key=True),
        sa.Column(
            "connector_id",
            postgresql.UUID(as_uuid=True),
            sa.ForeignKey("openapi_connectors.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("document_sha256", sa.String(64), nullable=False),
        sa.Column("document_gzip", sa.LargeBinary(), nullable=False),
        sa.Column("source_url", sa.String(2000), nullable=False),
        sa.Column("definition", postgresql.JSONB(), nullable=False),
        sa.Column("operation_versions", postgresql.JSONB(), nullable=False),
        sa.Column("changes", postgresql.JSONB(), nullable=False),
        sa.Column(
            "created_by",
            postgresql.UUID(as_uuid=True),
            sa.ForeignKey("users.id", ondelete="SET NULL"),
            nullable=True,
        ),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.UniqueConstraint("connector_id", "number"),
    )
    op.create_index(
        "ix_openapi_connector_versions_connector_id",
        "openapi_connector_versions",
        ["connector_id"],
    )


def downgrade() -> None:
    op.drop_index("ix_openapi_connector_versions_connector_id", "openapi_connector_versions")
    op.drop_table("openapi_connector_versions")
    op.drop_table("openapi_connectors")
