"""PostgreSQL's cost per run: fewer index entries per run write, room for HOT updates

Revision ID: 0024_pg_cost
Revises: 0023_version_retention
Create Date: 2026-12-01 19:30:00

Every run writes its row twice into every index of ``runs``: on the insert and on the
update that ends it (the end changes ``status`` and ``finished_at``, so that update cannot
be HOT, https://www.postgresql.org/docs/current/storage-hot.html). Measured with
bench/steps.py (docs/performance.md, "PostgreSQL's share"):

- ``ix_runs_created (created_at)`` is dropped: ``ix_runs_created_id (created_at, id)
  INCLUDE (...)`` answers every query it answered (retention's cutoffs and deletes, the
  runs list), as its leading column.
- Indexes over columns that are NULL for nearly every run get ``WHERE <column> IS NOT
  NULL``, so a run without a value writes no entry into them: ``parent_run_id`` and
  ``rerun_of`` (the foreign keys' ``ON DELETE SET NULL`` look-ups and the child / re-run
  lists compare with ``=``, which implies NOT NULL), the idempotency key (a partial unique
  index: NULLs never conflicted), ``finished_at`` (retention and the dashboard compare it
  with ``<`` / ``>=`` or ask ``IS NOT NULL``) and ``ix_runs_deadline`` (the run-timeout
  sweep compares ``deadline_at < now``; ``min(deadline_at)`` skips NULLs).
- ``runs`` gets ``fillfactor = 80``: the updates of a running run (one per step: its
  revision and output) change no indexed column and stay HOT only when the row's page
  has room for the new version.
- The search vector's update trigger (0020_search) fires only ``WHEN`` input, output or
  error changed: the engine's write sets those columns on every step, and calling the
  PL/pgSQL function just to find them unchanged cost a function call per write. Inserts
  have a trigger of their own; the function is unchanged.

Creating the new indexes reads ``runs`` once each under a lock that blocks writes; on a
large installation run this migration in a maintenance window.
"""

from alembic import op

revision = "0024_pg_cost"
down_revision = "0023_version_retention"
branch_labels = None
depends_on = None

RUNS_FILLFACTOR = 80

# (index, column, extra predicate) of the indexes made partial on "<column> IS NOT NULL"
PARTIAL = (
    ("ix_runs_parent_run_id", "parent_run_id", ""),
    ("ix_runs_rerun_of", "rerun_of", ""),
    ("ix_runs_finished", "finished_at", ""),
    ("ix_runs_deadline", "deadline_at", "status in ('running','waiting','paused') and "),
)


UPDATE_TRIGGER = """
create trigger runs_search_vector before update of input, output, error on runs
  for each row when (old.input is distinct from new.input
                     or old.output is distinct from new.output
                     or old.error is distinct from new.error)
  execute function runs_search_vector()
"""
INSERT_TRIGGER = """
create trigger runs_search_vector_insert before insert on runs
  for each row execute function runs_search_vector()
"""
# as 0020_search created it
OLD_TRIGGER = """
create trigger runs_search_vector before insert or update of input, output, error on runs
  for each row execute function runs_search_vector()
"""


def upgrade() -> None:
    op.drop_index("ix_runs_created", table_name="runs")
    for name, column, extra in PARTIAL:
        op.execute(f"drop index {name}")
        op.execute(f"create index {name} on runs ({column}) where {extra}{column} is not null")
    op.execute("alter table runs drop constraint runs_idempotency_key_key")
    op.execute(
        "create unique index ix_runs_idempotency_key on runs (idempotency_key)"
        " where idempotency_key is not null"
    )
    op.execute(f"alter table runs set (fillfactor = {RUNS_FILLFACTOR})")
    op.execute("drop trigger runs_search_vector on runs")
    op.execute(INSERT_TRIGGER)
    op.execute(UPDATE_TRIGGER)


def downgrade() -> None:
    op.execute("drop trigger runs_search_vector on runs")
    op.execute("drop trigger runs_search_vector_insert on runs")
    op.execute(OLD_TRIGGER)
    op.execute("alter table runs reset (fillfactor)")
    op.execute("drop index ix_runs_idempotency_key")
    op.execute("alter table runs add constraint runs_idempotency_key_key unique (idempotency_key)")
    for name, column, extra in PARTIAL:
        op.execute(f"drop index {name}")
        where = f" where {extra.removesuffix(' and ')}" if extra else ""
        op.execute(f"create index {name} on runs ({column}){where}")
    op.create_index("ix_runs_created", "runs", ["created_at"])
