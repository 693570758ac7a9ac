"""search: workflow tags, full-text and trigram indexes, the search indexer's cursors

Revision ID: 0020_search
Revises: 0019_version_note
Create Date: 2026-12-01 10:45:00

PostgreSQL search (docs/search.md) queries the tables themselves through:

- ``run_search_vector(input, output, error)``: an IMMUTABLE ``tsvector`` of the string and
  number values of a run's input and output, with the error's values at weight B, kept in
  ``runs.search_vector`` by a trigger that recomputes it only when input, output or error
  change (not on status-only updates), with a GIN index (``ix_runs_search``); storing it
  keeps phrase rechecks, ranking and headlines from re-reading the JSON of every match;
  btree indexes for the newest-first keyset pages overall and per status, covering the
  facet columns (status, trigger, workflow);
- ``audit_search_vector(...)`` and its GIN index over the audit log;
- ``workflows.tags`` (``text[]``, GIN) and a trigram index (pg_trgm) on workflow names for
  fuzzy name matches. When the server lacks the pg_trgm extension the index is left out
  and names match by substring (the search says so in its log once).

``search_cursors`` holds the Elasticsearch indexer's position in each outbox (events,
audit log): the highest id below which every row has been indexed.
"""

import logging

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0020_search"
down_revision = "0019_version_note"
branch_labels = None
depends_on = None

log = logging.getLogger(__name__)

RUN_VECTOR = """
create function run_search_vector(input jsonb, output jsonb, error jsonb)
returns tsvector language sql immutable parallel safe as $$
  select jsonb_to_tsvector('simple'::regconfig, coalesce(input, 'null'::jsonb),
                           '["string", "numeric"]'::jsonb)
      || jsonb_to_tsvector('simple'::regconfig, coalesce(output, 'null'::jsonb),
                           '["string", "numeric"]'::jsonb)
      || setweight(jsonb_to_tsvector('simple'::regconfig, coalesce(error, 'null'::jsonb),
                                     '["string", "numeric"]'::jsonb), 'B')
$$;
"""

RUN_VECTOR_TRIGGER = """
create function runs_search_vector() returns trigger language plpgsql as $$
begin
  if tg_op = 'INSERT' or new.input is distinct from old.input
     or new.output is distinct from old.output or new.error is distinct from old.error then
    new.search_vector := run_search_vector(new.input, new.output, new.error);
  end if;
  return new;
end
$$;
"""
RUN_VECTOR_TRIGGER_ON = """
create trigger runs_search_vector before insert or update of input, output, error on runs
  for each row execute function runs_search_vector();
"""

AUDIT_VECTOR = """
create function audit_search_vector(
  action text, object_type text, object_id text, actor text,
  details jsonb, before jsonb, after jsonb)
returns tsvector language sql immutable parallel safe as $$
  select setweight(to_tsvector('simple'::regconfig,
             coalesce(action, '') || ' ' || coalesce(object_type, '') || ' '
             || coalesce(object_id, '') || ' ' || coalesce(actor, '')), 'A')
      || jsonb_to_tsvector('simple'::regconfig, coalesce(details, 'null'::jsonb),
                           '["string", "numeric"]'::jsonb)
      || jsonb_to_tsvector('simple'::regconfig, coalesce(before, 'null'::jsonb),
                           '["string", "numeric"]'::jsonb)
      || jsonb_to_tsvector('simple'::regconfig, coalesce(after, 'null'::jsonb),
                           '["string", "numeric"]'::jsonb)
$$;
"""


def _has_trgm() -> bool:
    bind = op.get_bind()
    available = bind.execute(
        sa.text("select 1 from pg_available_extensions where name = 'pg_trgm'")
    ).scalar()
    if not available:
        log.warning("pg_trgm is not available: workflow names match by substring only")
        return False
    op.execute("create extension if not exists pg_trgm")
    return True


def upgrade() -> None:
    op.add_column(
        "workflows",
        sa.Column(
            "tags",
            postgresql.ARRAY(sa.Text()),
            server_default=sa.text("'{}'::text[]"),
            nullable=False,
        ),
    )
    op.create_index("ix_workflows_tags", "workflows", ["tags"], postgresql_using="gin")
    if _has_trgm():
        op.execute(
            "create index ix_workflows_name_trgm on workflows using gin (lower(name) gin_trgm_ops)"
        )
    op.execute(RUN_VECTOR)
    op.execute(AUDIT_VECTOR)
    op.add_column("runs", sa.Column("search_vector", postgresql.TSVECTOR(), nullable=True))
    op.execute("update runs set search_vector = run_search_vector(input, output, error)")
    op.execute(RUN_VECTOR_TRIGGER)
    op.execute(RUN_VECTOR_TRIGGER_ON)
    op.execute("create index ix_runs_search on runs using gin (search_vector)")
    # covering (INCLUDE) the facet columns: the newest matches are counted by status,
    # trigger and workflow from the index alone (an index-only scan)
    op.create_index(
        "ix_runs_created_id",
        "runs",
        ["created_at", "id"],
        postgresql_include=["status", "trigger", "workflow_id"],
    )
    op.create_index(
        "ix_runs_status_created_id",
        "runs",
        ["status", "created_at", "id"],
        postgresql_include=["trigger", "workflow_id"],
    )
    op.execute(
        "create index ix_audit_log_search on audit_log using gin (audit_search_vector("
        "action, object_type, object_id, actor_label, details, before, after))"
    )
    op.create_table(
        "search_cursors",
        sa.Column("name", sa.String(60), primary_key=True),
        sa.Column("position", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.func.now(),
        ),
    )


def downgrade() -> None:
    op.drop_table("search_cursors")
    op.execute("drop index if exists ix_audit_log_search")
    op.drop_index("ix_runs_status_created_id", table_name="runs")
    op.drop_index("ix_runs_created_id", table_name="runs")
    op.execute("drop index if exists ix_runs_search")
    op.execute("drop trigger if exists runs_search_vector on runs")
    op.execute("drop function if exists runs_search_vector")
    op.drop_column("runs", "search_vector")
    op.execute("drop function if exists audit_search_vector")
    op.execute("drop function if exists run_search_vector")
    op.execute("drop index if exists ix_workflows_name_trgm")
    op.drop_index("ix_workflows_tags", table_name="workflows")
    op.drop_column("workflows", "tags")
