"""version retention: an index on runs.version_id

Revision ID: 0023_version_retention
Revises: 0022_run_search_by_workflow
Create Date: 2026-12-01 14:05:00

Retention removes published workflow versions no kept run references
(backend/services/operations/retention_versions.py). ``ix_runs_version_id`` answers "does a run use
this version?" and the foreign key check of each deleted version from the index instead of
a scan of the runs.
"""

from alembic import op

revision = "0023_version_retention"
down_revision = "0022_run_search_by_workflow"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_runs_version_id", "runs", ["version_id"])


def downgrade() -> None:
    op.drop_index("ix_runs_version_id", table_name="runs")
