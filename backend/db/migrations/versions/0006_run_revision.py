"""run revision: a counter bumped by every engine write of a run

Revision ID: 0006_run_revision
Revises: 0003_triggers
Create Date: 2026-11-29 14:20:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_run_revision"
down_revision = "0003_triggers"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "runs", sa.Column("revision", sa.BigInteger(), server_default=sa.text("0"), nullable=False)
    )


def downgrade() -> None:
    op.drop_column("runs", "revision")
