"""draft revision: optimistic concurrency of workflow drafts (who saved last, when)

Revision ID: 0015_draft_revision
Revises: 0010_audit
Create Date: 2026-12-01 08:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0015_draft_revision"
down_revision = "0010_audit"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "workflows",
        sa.Column("draft_revision", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
    )
    op.add_column(
        "workflows",
        sa.Column(
            "draft_saved_by",
            sa.UUID(),
            sa.ForeignKey("users.id", ondelete="SET NULL"),
            nullable=True,
        ),
    )
    op.add_column(
        "workflows", sa.Column("draft_saved_at", sa.DateTime(timezone=True), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("workflows", "draft_saved_at")
    op.drop_column("workflows", "draft_saved_by")
    op.drop_column("workflows", "draft_revision")
