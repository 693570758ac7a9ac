"""workflow archive: archived workflows leave the lists and stop triggering, runs stay

Revision ID: 0016_workflow_archive
Revises: 0015_draft_revision
Create Date: 2026-12-01 10:50:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0016_workflow_archive"
down_revision = "0015_draft_revision"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("workflows", sa.Column("archived_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        "workflows",
        sa.Column(
            "archived_by",
            sa.UUID(),
            sa.ForeignKey("users.id", ondelete="SET NULL"),
            nullable=True,
        ),
    )
    op.create_index("ix_workflows_archived_at", "workflows", ["archived_at"])


def downgrade() -> None:
    op.drop_index("ix_workflows_archived_at", table_name="workflows")
    op.drop_column("workflows", "archived_by")
    op.drop_column("workflows", "archived_at")
