"""Outgoing event subscriptions, their deliveries and every delivery attempt

Revision ID: 0029_event_subscriptions
Revises: 0028_openapi_connectors
Create Date: 2026-12-05 05:00:00

A user with manage rights on a workflow (an admin for a project or every workflow)
subscribes a URL to events (docs/api.md, "Event subscriptions"); the scheduler leader
turns outbox rows into deliveries (one per subscription and outbox row, unique) and sends
them signed per Standard Webhooks, logging each attempt.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0029_event_subscriptions"
down_revision = "0028_openapi_connectors"
branch_labels = None
depends_on = None


def _now() -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(
        "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
    )


def upgrade() -> None:
    uuid = postgresql.UUID(as_uuid=True)
    op.create_table(
        "event_subscriptions",
        sa.Column("id", uuid, primary_key=True),
        sa.Column(
            "workflow_id", uuid, sa.ForeignKey("workflows.id", ondelete="CASCADE"), nullable=True
        ),
        sa.Column(
            "project_id", uuid, sa.ForeignKey("projects.id", ondelete="CASCADE"), nullable=True
        ),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), server_default=sa.text("''"), nullable=False),
        sa.Column("events", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("secret", sa.LargeBinary(), nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column(
            "consecutive_failures", sa.Integer(), server_default=sa.text("0"), nullable=False
        ),
        sa.Column("retry_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("disabled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("disabled_reason", sa.Text(), nullable=True),
        sa.Column(
            "events_since",
            sa.DateTime(timezone=True),
            server_default=sa.func.now(),
            nullable=False,
        ),
        sa.Column(
            "created_by", uuid, sa.ForeignKey("users.id", ondelete="SET NULL"), nullable=True
        ),
        _now(),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
    )
    op.create_index("ix_event_subscriptions_workflow_id", "event_subscriptions", ["workflow_id"])
    op.create_table(
        "event_deliveries",
        sa.Column("id", uuid, primary_key=True),
        sa.Column(
            "subscription_id",
            uuid,
            sa.ForeignKey("event_subscriptions.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("source", sa.String(10), nullable=False),
        sa.Column("source_id", sa.BigInteger(), nullable=False),
        sa.Column("event_type", sa.String(60), nullable=False),
        sa.Column("ordering_key", sa.String(80), nullable=False),
        sa.Column("run_id", uuid, nullable=True),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("status", sa.String(12), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        _now(),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("subscription_id", "source", "source_id"),
    )
    op.create_index(
        "ix_event_deliveries_pending",
        "event_deliveries",
        ["subscription_id", "ordering_key", "source_id"],
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index(
        "ix_event_deliveries_subscription", "event_deliveries", ["subscription_id", "created_at"]
    )
    op.create_table(
        "event_delivery_attempts",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column(
            "delivery_id",
            uuid,
            sa.ForeignKey("event_deliveries.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("response", sa.Text(), server_default=sa.text("''"), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("manual", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )
    op.create_index(
        "ix_event_delivery_attempts_delivery", "event_delivery_attempts", ["delivery_id", "id"]
    )
    # the producer's positions start at the newest outbox rows: nothing older is wanted
    for name, table in (("subscriptions:events", "events"), ("subscriptions:audit", "audit_log")):
        op.execute(
            f"insert into search_cursors (name, position) select '{name}', coalesce(max(id), 0)"
            f" from {table} on conflict (name) do nothing"
        )


def downgrade() -> None:
    op.drop_table("event_delivery_attempts")
    op.drop_table("event_deliveries")
    op.drop_table("event_subscriptions")
    op.execute("delete from search_cursors where name like 'subscriptions:%'")
