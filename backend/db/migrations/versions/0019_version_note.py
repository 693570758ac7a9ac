"""version note: an optional note given at publish (what changed, why)

Revision ID: 0019_version_note
Revises: 0018_test_runs
Create Date: 2026-12-01 10:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0019_version_note"
down_revision = "0018_test_runs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "workflow_versions",
        sa.Column("note", sa.Text(), server_default=sa.text("''"), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("workflow_versions", "note")
