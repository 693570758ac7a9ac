"""audit log context: who (label), from where, which request, before/after of a change

Revision ID: 0007_audit_context
Revises: 0006_run_revision
Create Date: 2026-12-01 07:55:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007_audit_context"
down_revision = "0006_run_revision"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("audit_log", sa.Column("actor_label", sa.String(320), nullable=True))
    op.add_column("audit_log", sa.Column("address", sa.String(64), nullable=True))
    op.add_column("audit_log", sa.Column("request_id", sa.String(64), nullable=True))
    op.add_column("audit_log", sa.Column("before", postgresql.JSONB(), nullable=True))
    op.add_column("audit_log", sa.Column("after", postgresql.JSONB(), nullable=True))
    op.create_index("ix_audit_log_actor_at", "audit_log", ["actor_user_id", "at"])
    op.create_index("ix_audit_log_action_at", "audit_log", ["action", "at"])


def downgrade() -> None:
    op.drop_index("ix_audit_log_action_at", table_name="audit_log")
    op.drop_index("ix_audit_log_actor_at", table_name="audit_log")
    for column in ("after", "before", "request_id", "address", "actor_label"):
        op.drop_column("audit_log", column)
