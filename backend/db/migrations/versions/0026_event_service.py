"""The event service: trigger subscriptions, the event inbox, registrations to retire and
dead letters

Revision ID: 0026_event_service
Revises: 0025_run_children_fk
Create Date: 2026-12-04 21:30:00

Connector triggers of kind ``app_webhook``, ``polling``, ``broker`` and ``email`` are run
by the event service (docs/connectors.md). ``trigger_subscriptions`` holds one row per
workflow whose active version starts with one (cursor, registration, lease, status line);
``trigger_events`` is the inbox, unique per ``(workflow_id, dedupe_key)``, so each event
starts exactly one run; ``trigger_retirements`` lists hooks to delete at the vendor;
``trigger_dead_letters`` keeps the messages no event could be made of.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0026_event_service"
down_revision = "0025_run_children_fk"
branch_labels = None
depends_on = None


def _now() -> sa.TextClause:
    return sa.text("now()")


def _workflow_id() -> sa.Column:  # type: ignore[type-arg]
    fk = sa.ForeignKey("workflows.id", ondelete="CASCADE")
    return sa.Column("workflow_id", postgresql.UUID(as_uuid=True), fk, nullable=False)


def upgrade() -> None:
    op.create_table(
        "trigger_subscriptions",
        sa.Column("id", postgresql.UUID(as_uuid=True), primary_key=True),
        _workflow_id(),
        sa.Column("token", sa.String(64), nullable=False),
        sa.Column("version_number", sa.Integer(), nullable=False),
        sa.Column("step_id", sa.String(200), nullable=False),
        sa.Column("node_type", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("config", postgresql.JSONB(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("interval_seconds", sa.Float(), nullable=False),
        sa.Column("include_existing", sa.Boolean(), nullable=False),
        sa.Column("cursor", postgresql.JSONB(), nullable=True),
        sa.Column("baseline_taken", sa.Boolean(), nullable=False),
        sa.Column("next_poll_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("registration", sa.LargeBinary(), nullable=True),
        sa.Column("registration_status", sa.String(20), nullable=False),
        sa.Column("next_check_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lease_owner", sa.String(200), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_polled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_event_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_error_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_now()),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=_now()),
        sa.UniqueConstraint("workflow_id"),
        sa.UniqueConstraint("token"),
    )
    op.create_index(
        "ix_trigger_subscriptions_poll",
        "trigger_subscriptions",
        ["next_poll_at"],
        postgresql_where=sa.text("enabled"),
    )
    op.create_index("ix_trigger_subscriptions_check", "trigger_subscriptions", ["next_check_at"])
    op.create_table(
        "trigger_retirements",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        _workflow_id(),
        sa.Column("node_type", sa.String(200), nullable=False),
        sa.Column("config", postgresql.JSONB(), nullable=False),
        sa.Column("version_number", sa.Integer(), nullable=False),
        sa.Column("registration", sa.LargeBinary(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
    )
    op.create_table(
        "trigger_events",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        _workflow_id(),
        sa.Column("version_number", sa.Integer(), nullable=False),
        sa.Column("node_type", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("dedupe_key", sa.String(200), nullable=False),
        sa.Column("data", postgresql.JSONB(), nullable=True),
        sa.Column("meta", postgresql.JSONB(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("run_id", postgresql.UUID(as_uuid=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.UniqueConstraint("workflow_id", "dedupe_key"),
    )
    op.create_index(
        "ix_trigger_events_pending",
        "trigger_events",
        ["received_at"],
        postgresql_where=sa.text("run_id is null"),
    )
    op.create_index(
        "ix_trigger_events_run",
        "trigger_events",
        ["run_id"],
        postgresql_where=sa.text("run_id is not null"),
    )
    op.create_index("ix_trigger_events_received", "trigger_events", ["received_at"])
    op.create_table(
        "trigger_dead_letters",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        _workflow_id(),
        sa.Column("node_type", sa.String(200), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("raw", sa.Text(), nullable=False),
        sa.Column("encoding", sa.String(10), nullable=False),
        sa.Column("meta", postgresql.JSONB(), nullable=False),
    )
    op.create_index(
        "ix_trigger_dead_letters_workflow", "trigger_dead_letters", ["workflow_id", "id"]
    )


def downgrade() -> None:
    op.drop_table("trigger_dead_letters")
    op.drop_table("trigger_events")
    op.drop_table("trigger_retirements")
    op.drop_table("trigger_subscriptions")
