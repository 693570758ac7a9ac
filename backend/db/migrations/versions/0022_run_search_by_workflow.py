"""run search by workflow: one GIN index over (workflow_id, search_vector)

Revision ID: 0022_run_search_by_workflow
Revises: 0021_retention
Create Date: 2026-12-01 13:55:00

Free-text run searches are nearly always narrowed to some workflows: by the reader's
permissions, by ``workflow:`` or by ``tag:`` (docs/search.md). With the text alone in the
GIN index, PostgreSQL finds every run holding the words and re-reads each one from the
table (phrases are checked against the stored positions) before it can drop the runs of
other workflows. A multicolumn GIN index over ``(workflow_id, search_vector)`` (the
``btree_gin`` extension gives uuid its GIN operator class) intersects both in the index, so
only the runs of the wanted workflows are read; a condition on the text alone still uses
it (PostgreSQL manual, "Multicolumn Indexes" 11.3, and F.8 btree_gin).

``ix_runs_workflow_search`` replaces ``ix_runs_search``. A server without btree_gin keeps
``ix_runs_search`` (searches are slower, not different), and says so in the log.
"""

import logging

import sqlalchemy as sa
from alembic import op

revision = "0022_run_search_by_workflow"
down_revision = "0021_retention"
branch_labels = None
depends_on = None

log = logging.getLogger(__name__)


def upgrade() -> None:
    available = (
        op.get_bind()
        .execute(sa.text("select 1 from pg_available_extensions where name = 'btree_gin'"))
        .scalar()
    )
    if not available:
        log.warning("btree_gin is not available: run searches keep the text-only GIN index")
        return
    op.execute("create extension if not exists btree_gin")
    op.execute(
        "create index ix_runs_workflow_search on runs using gin (workflow_id, search_vector)"
    )
    op.execute("drop index if exists ix_runs_search")


def downgrade() -> None:
    op.execute("create index if not exists ix_runs_search on runs using gin (search_vector)")
    op.execute("drop index if exists ix_runs_workflow_search")
