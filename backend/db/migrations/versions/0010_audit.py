"""audit log: append-only in PostgreSQL (guard trigger), retention through audit_log_purge

Revision ID: 0010_audit
Revises: 0011_payloads
Create Date: 2026-12-01 08:00:00

``audit_log_guard`` refuses every UPDATE, DELETE and TRUNCATE of ``audit_log`` except:

- the one update PostgreSQL itself makes when a user row is deleted (the foreign key's
  ``ON DELETE SET NULL`` clears ``actor_user_id``; ``actor_label`` keeps who it was);
- deleting rows older than the transaction-local setting ``railyard.audit_purge_before``,
  which only ``audit_log_purge(keep_days)`` sets (retention, docs/security.md);
- TRUNCATE when that setting is ``infinity`` (wiping a test database).
"""

from alembic import op

revision = "0010_audit"
down_revision = "0011_payloads"
branch_labels = None
depends_on = None

GUARD = """
create function audit_log_guard() returns trigger language plpgsql as $$
declare
  purge_before timestamptz;
begin
  if tg_op = 'UPDATE' then
    if old.actor_user_id is not null and new.actor_user_id is null
       and (to_jsonb(new) - 'actor_user_id') = (to_jsonb(old) - 'actor_user_id') then
      return new;
    end if;
    raise exception 'audit_log is append-only: UPDATE refused'
      using errcode = 'insufficient_privilege';
  end if;
  purge_before := nullif(current_setting('railyard.audit_purge_before', true), '')::timestamptz;
  if tg_op = 'DELETE' then
    if purge_before is not null and old.at < purge_before then
      return old;
    end if;
    raise exception 'audit_log is append-only: DELETE refused'
      using errcode = 'insufficient_privilege',
            hint = 'rows older than the retention leave through audit_log_purge(keep_days)';
  end if;
  if purge_before = 'infinity'::timestamptz then
    return null;
  end if;
  raise exception 'audit_log is append-only: TRUNCATE refused'
    using errcode = 'insufficient_privilege';
end
$$;
"""

PURGE = """
create function audit_log_purge(keep_days integer) returns bigint language plpgsql as $$
declare
  cutoff timestamptz;
  deleted bigint;
begin
  if keep_days is null or keep_days < 1 then
    raise exception 'keep_days must be at least 1, got %', keep_days
      using errcode = 'invalid_parameter_value';
  end if;
  cutoff := now() - make_interval(days => keep_days);
  perform set_config('railyard.audit_purge_before', cutoff::text, true);
  delete from audit_log where at < cutoff;
  get diagnostics deleted = row_count;
  perform set_config('railyard.audit_purge_before', '', true);
  return deleted;
end
$$;
"""


def upgrade() -> None:
    op.execute(GUARD)
    op.execute(PURGE)
    op.execute(
        "create trigger audit_log_append_only before update or delete on audit_log"
        " for each row execute function audit_log_guard()"
    )
    op.execute(
        "create trigger audit_log_no_truncate before truncate on audit_log"
        " for each statement execute function audit_log_guard()"
    )
    op.create_index("ix_audit_log_object", "audit_log", ["object_type", "object_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_audit_log_object", table_name="audit_log")
    op.execute("drop trigger audit_log_no_truncate on audit_log")
    op.execute("drop trigger audit_log_append_only on audit_log")
    op.execute("drop function audit_log_purge(integer)")
    op.execute("drop function audit_log_guard()")
