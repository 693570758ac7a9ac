"""retention: payload last use, run time indexes, retention passes, batched audit purge

Revision ID: 0021_retention
Revises: 0020_search
Create Date: 2026-12-01 10:50:00

- ``payloads.last_used_at``: set whenever a write references the payload again, so
  retention can tell a payload no kept run references (backend/services/operations/retention.py).
- ``ix_runs_created`` / ``ix_runs_finished``: retention finds old runs and the dashboard
  counts recent ones by time without scanning the table.
- ``retention_passes``: what each retention pass removed, per data class (shown on the
  dashboard).
- ``audit_log_purge(keep_days, max_rows)``: like ``audit_log_purge(keep_days)`` but deletes
  at most ``max_rows`` of the oldest expired rows, so retention works in short
  transactions; the append-only guard of ``0010_audit`` is unchanged (it still lets only
  rows older than the cutoff go, and only through this function's transaction setting).
"""

import sqlalchemy as sa
from alembic import op

revision = "0021_retention"
down_revision = "0020_search"
branch_labels = None
depends_on = None

PURGE_BATCH = """
create function audit_log_purge(keep_days integer, max_rows integer) returns bigint
language plpgsql as $$
declare
  cutoff timestamptz;
  deleted bigint;
begin
  if keep_days is null or keep_days < 1 then
    raise exception 'keep_days must be at least 1, got %', keep_days
      using errcode = 'invalid_parameter_value';
  end if;
  if max_rows is null or max_rows < 1 then
    raise exception 'max_rows must be at least 1, got %', max_rows
      using errcode = 'invalid_parameter_value';
  end if;
  cutoff := now() - make_interval(days => keep_days);
  perform set_config('railyard.audit_purge_before', cutoff::text, true);
  delete from audit_log where id in (
    select id from audit_log where at < cutoff order by at limit max_rows
  );
  get diagnostics deleted = row_count;
  perform set_config('railyard.audit_purge_before', '', true);
  return deleted;
end
$$;
"""


def upgrade() -> None:
    op.add_column(
        "payloads",
        sa.Column(
            "last_used_at",
            sa.DateTime(timezone=True),
            server_default=sa.func.now(),
            nullable=False,
        ),
    )
    op.execute("update payloads set last_used_at = created_at")
    op.create_index("ix_payloads_last_used_at", "payloads", ["last_used_at"])
    op.create_index("ix_runs_created", "runs", ["created_at"])
    op.create_index("ix_runs_finished", "runs", ["finished_at"])
    op.create_index("ix_files_created", "files", ["created_at"])
    op.create_index("ix_events_created", "events", ["created_at"])
    op.create_table(
        "retention_passes",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column("data_class", sa.String(40), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cutoff", sa.DateTime(timezone=True), nullable=True),
        sa.Column("max_rows", sa.Integer(), nullable=True),
        sa.Column("deleted", sa.BigInteger(), nullable=False),
        sa.Column("batches", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
    )
    op.create_index("ix_retention_passes_finished_at", "retention_passes", ["finished_at"])
    op.execute(PURGE_BATCH)


def downgrade() -> None:
    op.execute("drop function audit_log_purge(integer, integer)")
    op.drop_index("ix_retention_passes_finished_at", table_name="retention_passes")
    op.drop_table("retention_passes")
    op.drop_index("ix_events_created", table_name="events")
    op.drop_index("ix_files_created", table_name="files")
    op.drop_index("ix_runs_finished", table_name="runs")
    op.drop_index("ix_runs_created", table_name="runs")
    op.drop_index("ix_payloads_last_used_at", table_name="payloads")
    op.drop_column("payloads", "last_used_at")
