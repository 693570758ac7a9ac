"""engine2: workflow settings, run deadlines (run timeout), re-run links

Revision ID: 0005_engine2
Revises: 0002_engine
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005_engine2"
down_revision = "0004_connectors"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "workflows",
        sa.Column(
            "settings",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
    )
    op.add_column("runs", sa.Column("deadline_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("runs", sa.Column("rerun_of", sa.UUID(), nullable=True))
    op.create_index(op.f("ix_runs_rerun_of"), "runs", ["rerun_of"], unique=False)
    op.create_foreign_key(
        "runs_rerun_of_fkey", "runs", "runs", ["rerun_of"], ["id"], ondelete="SET NULL"
    )
    op.create_index(
        "ix_runs_deadline",
        "runs",
        ["deadline_at"],
        unique=False,
        postgresql_where=sa.text("status in ('running','waiting','paused')"),
    )


def downgrade() -> None:
    op.drop_index(
        "ix_runs_deadline",
        table_name="runs",
        postgresql_where=sa.text("status in ('running','waiting','paused')"),
    )
    op.drop_constraint("runs_rerun_of_fkey", "runs", type_="foreignkey")
    op.drop_index(op.f("ix_runs_rerun_of"), table_name="runs")
    op.drop_column("runs", "rerun_of")
    op.drop_column("runs", "deadline_at")
    op.drop_column("workflows", "settings")
