"""engine: child runs (parent link) and step scratch data

Revision ID: 0002_engine
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002_engine"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("parent_run_id", sa.UUID(), nullable=True))
    op.add_column("runs", sa.Column("parent_step_id", sa.String(length=200), nullable=True))
    op.add_column("runs", sa.Column("parent_index", sa.Integer(), nullable=True))
    op.create_index(op.f("ix_runs_parent_run_id"), "runs", ["parent_run_id"], unique=False)
    op.create_foreign_key(
        "runs_parent_run_id_fkey", "runs", "runs", ["parent_run_id"], ["id"], ondelete="SET NULL"
    )
    op.add_column(
        "step_runs",
        sa.Column("data", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("step_runs", "data")
    op.drop_constraint("runs_parent_run_id_fkey", "runs", type_="foreignkey")
    op.drop_index(op.f("ix_runs_parent_run_id"), table_name="runs")
    op.drop_column("runs", "parent_index")
    op.drop_column("runs", "parent_step_id")
    op.drop_column("runs", "parent_run_id")
