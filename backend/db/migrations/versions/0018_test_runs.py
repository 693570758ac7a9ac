"""test runs: pinned step data on workflows, draft snapshot versions

Revision ID: 0018_test_runs
Revises: 0016_workflow_archive
Create Date: 2026-12-01 10:55:00

``workflows.pinned_data`` holds the data pinned on the draft's nodes
(``{node_id: {"data": ..., "pinned_at": iso, "pinned_by": user id}}``).
``workflow_versions.kind`` tells published versions (``published``) from the unlisted
snapshots of the draft that test runs execute (``draft``, number 0): version numbers and
content hashes stay unique among published versions only; snapshots are unique by hash.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0018_test_runs"
down_revision = "0016_workflow_archive"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "workflows",
        sa.Column(
            "pinned_data",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
    )
    op.add_column(
        "workflow_versions",
        sa.Column("kind", sa.String(length=10), server_default="published", nullable=False),
    )
    op.drop_constraint(
        "workflow_versions_workflow_id_number_key", "workflow_versions", type_="unique"
    )
    op.drop_constraint(
        "workflow_versions_workflow_id_content_hash_key", "workflow_versions", type_="unique"
    )
    op.create_index(
        "uq_workflow_versions_number",
        "workflow_versions",
        ["workflow_id", "number"],
        unique=True,
        postgresql_where=sa.text("kind = 'published'"),
    )
    op.create_index(
        "uq_workflow_versions_hash",
        "workflow_versions",
        ["workflow_id", "kind", "content_hash"],
        unique=True,
    )


def downgrade() -> None:
    op.execute(
        "DELETE FROM runs WHERE version_id IN "
        "(SELECT id FROM workflow_versions WHERE kind = 'draft')"
    )
    op.execute("DELETE FROM workflow_versions WHERE kind = 'draft'")
    op.drop_index("uq_workflow_versions_hash", table_name="workflow_versions")
    op.drop_index("uq_workflow_versions_number", table_name="workflow_versions")
    op.create_unique_constraint(
        "workflow_versions_workflow_id_content_hash_key",
        "workflow_versions",
        ["workflow_id", "content_hash"],
    )
    op.create_unique_constraint(
        "workflow_versions_workflow_id_number_key", "workflow_versions", ["workflow_id", "number"]
    )
    op.drop_column("workflow_versions", "kind")
    op.drop_column("workflows", "pinned_data")
