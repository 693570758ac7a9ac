"""A parent's pass reads its running children, not all of them

Revision ID: 0030_children_pass
Revises: 0029_event_subscriptions
Create Date: 2026-12-05 05:35:00

Advancing a Sub-workflow or For-each parent read every child row of the parent to count
the succeeded ones and find the next index (10,000 rows per pass of a 10,000-item
For-each; docs/engine.md, "For-each at scale"). Two indexes let each pass read only what
it needs (``backend.db.run_state._SELECT_CHILDREN``):

- ``ix_runs_parent_run_id (parent_run_id)`` becomes ``(parent_run_id, parent_step_id,
  parent_index)``: the calling steps (a skip scan) and each one's highest index (one
  descent) from the index; it still answers the foreign key's ``ON DELETE SET NULL``
  look-ups and the children pages (keyset on step and index).
- ``ix_runs_parent_open`` indexes the children that did not succeed, the few a pass lists.

Creating them reads ``runs`` once each under a lock that blocks writes; on a large
installation run this migration in a maintenance window.
"""

from alembic import op

revision = "0030_children_pass"
down_revision = "0029_event_subscriptions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("drop index ix_runs_parent_run_id")
    op.execute(
        "create index ix_runs_parent_run_id on runs (parent_run_id, parent_step_id, parent_index)"
        " where parent_run_id is not null"
    )
    op.execute(
        "create index ix_runs_parent_open on runs (parent_run_id, parent_step_id, parent_index)"
        " where parent_run_id is not null and status <> 'succeeded'"
    )


def downgrade() -> None:
    op.execute("drop index ix_runs_parent_open")
    op.execute("drop index ix_runs_parent_run_id")
    op.execute(
        "create index ix_runs_parent_run_id on runs (parent_run_id) where parent_run_id is not null"
    )
