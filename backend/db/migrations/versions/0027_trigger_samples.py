"""The designer's "Fetch test event" window of an app webhook trigger

Revision ID: 0027_trigger_samples
Revises: 0026_event_service
Create Date: 2026-12-05 10:00:00

While the designer listens for a test event of a connector app webhook, the workflow's
trigger subscription row (created for the draft when the workflow was never published,
so the trigger URL exists before the first publish) says until when it listens
(``sample_until``) and what happened so far (``sample``: who listens for which node, the
outcome and its message), so a delivery to the trigger's URL is kept as the sample
without a look-up of its own (docs/designer.md, "Connector triggers").
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0027_trigger_samples"
down_revision = "0026_event_service"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "trigger_subscriptions",
        sa.Column("sample_until", sa.DateTime(timezone=True), nullable=True),
    )
    op.add_column(
        "trigger_subscriptions",
        sa.Column("sample", postgresql.JSONB(), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("trigger_subscriptions", "sample")
    op.drop_column("trigger_subscriptions", "sample_until")
