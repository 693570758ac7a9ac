"""The events' creation-time index as a BRIN index: no index entry per event

Revision ID: 0034_events_created_brin
Revises: 0033_scoped_start_keys
Create Date: 2026-12-05 16:00:00

Every run appends about four events per step (``step.ready``, ``step.started``,
``step.succeeded``, the run's own), and each event wrote one entry into each of the three
B-tree indexes of ``events``: 13 of the 86 index entries a 3-step run wrote
(bench/steps.py, docs/performance.md "Ninth round"). ``ix_events_created`` serves one
query, retention's ``created_at < cutoff`` batches (backend/services/operations/
retention.py, ``_prune_created``), and ``events`` is append-only in ``created_at`` order
(each row stamped at its insert), which is what a BRIN index (block range index,
https://www.postgresql.org/docs/current/brin-intro.html) is for: per range of 128 heap
pages it keeps the least and greatest ``created_at``. An insert into a range not yet
summarized writes nothing into the index; ``autosummarize`` has autovacuum summarize a
range once inserts have moved on to the next one (VACUUM summarizes the full ranges
left). ``CREATE INDEX`` summarizes the table's last, partly filled range too (on a new
installation the empty first range), and every insert there, each with a later
``created_at``, would widen that summary: one WAL record per event, as many as the B-tree
entry it replaces (measured). So the migration hands that range back to the unsummarized
state (``brin_desummarize_range``). The
retention query becomes a bitmap scan over the ranges below the cutoff; a range whose
pages were reused after a purge widens and is read and rechecked, never missed.

Creating the index reads ``events`` once under a lock that blocks writes; on a large
installation run this migration in a maintenance window.
"""

from alembic import op

revision = "0034_events_created_brin"
down_revision = "0033_scoped_start_keys"
branch_labels = None
depends_on = None

# the range holding the table's last page (page 0 of an empty table); see above
LAST_RANGE_UNSUMMARIZED = """
select brin_desummarize_range('ix_events_created',
  greatest(pg_relation_size('events') / current_setting('block_size')::bigint - 1, 0))
"""


def upgrade() -> None:
    op.drop_index("ix_events_created", table_name="events")
    op.execute(
        "create index ix_events_created on events using brin (created_at) with (autosummarize = on)"
    )
    op.execute(LAST_RANGE_UNSUMMARIZED)


def downgrade() -> None:
    op.drop_index("ix_events_created", table_name="events")
    op.create_index("ix_events_created", "events", ["created_at"])
