"""An index of the workflows each draft calls

Revision ID: 0032_called_workflows_index
Revises: 0031_delivery_log_paging
Create Date: 2026-12-05 13:00:00

``ix_workflows_called``: a GIN index over the ``workflow_id`` of every node of each
non-archived draft (``jsonb_path_query_array(draft, '$.nodes[*].config.workflow_id')``).
The callers of a workflow (the For each and Sub-workflow steps naming it, whose inputs
type its Manual trigger: backend/services/workflows/child_contracts.py, ``callers``) are then one
index scan instead of reading every draft; the query spells the same expression.
"""

from alembic import op

revision = "0032_called_workflows_index"
down_revision = "0031_delivery_log_paging"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "create index ix_workflows_called on workflows using gin"
        " (jsonb_path_query_array(draft, '$.nodes[*].config.workflow_id'))"
        " where archived_at is null"
    )


def downgrade() -> None:
    op.execute("drop index ix_workflows_called")
