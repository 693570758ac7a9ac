"""The delivery log of event subscriptions paged by key and pruned by retention

Revision ID: 0031_delivery_log_paging
Revises: 0030_children_pass
Create Date: 2026-12-05 08:00:00

- ``ix_event_deliveries_subscription`` gains ``id``: a page of a subscription's log
  (newest first by ``(created_at, id)``, after the cursor's key) is one index range scan
  (backend/services/subscriptions/manage.py, ``delivery_page``).
- ``ix_event_deliveries_ended (created_at)`` over the deliveries no longer pending: the
  retention class ``deliveries`` removes the oldest of them in batches without reading the
  table (backend/services/operations/retention.py).
"""

from alembic import op

revision = "0031_delivery_log_paging"
down_revision = "0030_children_pass"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("drop index ix_event_deliveries_subscription")
    op.execute(
        "create index ix_event_deliveries_subscription"
        " on event_deliveries (subscription_id, created_at, id)"
    )
    op.execute(
        "create index ix_event_deliveries_ended on event_deliveries (created_at)"
        " where status <> 'pending'"
    )


def downgrade() -> None:
    op.execute("drop index ix_event_deliveries_ended")
    op.execute("drop index ix_event_deliveries_subscription")
    op.execute(
        "create index ix_event_deliveries_subscription"
        " on event_deliveries (subscription_id, created_at)"
    )
