"""A run's children lose their foreign key to ``runs``; one statement trigger deletes them

Revision ID: 0025_run_children_fk
Revises: 0024_pg_cost
Create Date: 2026-12-01 22:40:00

``step_runs``, ``attempts`` and ``events`` referenced ``runs(id)`` ``ON DELETE CASCADE``.
Every row inserted into them ran the foreign key's check, an SPI query
``SELECT 1 FROM ONLY runs x WHERE id = $1 FOR KEY SHARE OF x``: a row lock on the run (a
Heap/LOCK WAL record) per statement and table, and a trigger call per row (about 22 per
3-step run; docs/performance.md, "PostgreSQL's share"). The check bought nothing on the
engine's path: every statement that inserts a child row also inserts or locks its run
row (docs/engine.md, "The run's children").

What the foreign key gave on delete is kept by ``runs_delete_children``, an ``AFTER
DELETE ... FOR EACH STATEMENT`` trigger on ``runs`` with a transition table
(https://www.postgresql.org/docs/current/sql-createtrigger.html, "REFERENCING"): one
statement per child table deletes the rows of every run the statement removed
(retention's batches, a workflow's deletion cascading to its runs), each by its table's
``run_id`` index. Its function is
VOLATILE PL/pgSQL, so each of its statements takes a new snapshot under READ COMMITTED
and sees children committed by a transaction the run delete waited for.

``runs.workflow_id`` and ``runs.version_id`` keep their foreign keys: a run inserted
while its workflow or version is deleted must fail rather than be left behind, and
only the key-share lock of the check makes the two wait for each other.

Events with ``run_id`` NULL (outbox events of no run) are unaffected. Downgrade deletes
children whose run is gone (none when the trigger did its work) and restores the keys.
"""

from alembic import op

revision = "0025_run_children_fk"
down_revision = "0024_pg_cost"
branch_labels = None
depends_on = None

CHILDREN = ("events", "attempts", "step_runs")

# ``run_id = any(array(...))``: an index condition on each table's ``run_id`` index
# whatever the batch's size; PL/pgSQL keeps one plan per statement for the session, and a
# join with the transition table planned for a large first batch could stay a hash join
# over a whole table
FUNCTION = """
create function runs_delete_children() returns trigger language plpgsql volatile as $$
begin
  delete from events where run_id = any(array(select id from gone));
  delete from attempts where run_id = any(array(select id from gone));
  delete from step_runs where run_id = any(array(select id from gone));
  return null;
end
$$
"""
TRIGGER = """
create trigger runs_delete_children after delete on runs
  referencing old table as gone
  for each statement execute function runs_delete_children()
"""


def upgrade() -> None:
    op.execute(FUNCTION)
    op.execute(TRIGGER)
    for table in CHILDREN:
        op.execute(f"alter table {table} drop constraint {table}_run_id_fkey")


def downgrade() -> None:
    op.execute("drop trigger runs_delete_children on runs")
    op.execute("drop function runs_delete_children()")
    for table in CHILDREN:
        op.execute(
            f"delete from {table} c where c.run_id is not null"
            " and not exists (select from runs r where r.id = c.run_id)"
        )
        op.execute(
            f"alter table {table} add constraint {table}_run_id_fkey foreign key (run_id)"
            " references runs (id) on delete cascade"
        )
