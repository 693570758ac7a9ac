"""Outgoing event subscriptions: who wants which events at which URL, each message
(delivery) produced for them, and every attempt to send one (docs/api.md, "Event
subscriptions")."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base


def _uuid() -> uuid.UUID:
    return uuid.uuid4()


class EventSubscription(Base):
    """A URL subscribed to event types (``events``) of one workflow (``workflow_id``) or,
    workflow NULL, of every workflow of a project (``project_id``; both NULL: every
    workflow). ``secret`` is the Standard Webhooks signing key (``whsec_...``), encrypted
    with the credential keyring. ``consecutive_failures`` counts sending passes in a row in
    which every attempt failed; ``retry_at`` holds the next pass back while it is above 0;
    at ``RAILYARD_EVENT_SUBSCRIPTION_DISABLE_AFTER`` the subscription is disabled
    (``disabled_at``, ``disabled_reason``)."""

    __tablename__ = "event_subscriptions"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    workflow_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("workflows.id", ondelete="CASCADE"), nullable=True, index=True
    )
    project_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), nullable=True
    )
    url: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text, default="", server_default=text("''"))
    events: Mapped[list[str]] = mapped_column(ARRAY(Text))
    secret: Mapped[bytes] = mapped_column(LargeBinary)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True, server_default=text("true"))
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    retry_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    disabled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    disabled_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    # events written from then on are delivered: creation, or the last re-enabling
    events_since: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now()
    )
    created_by: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now()
    )


class EventDelivery(Base):
    """One message for one subscription, made from one outbox row (``source``: ``events``
    or ``audit``, ``source_id`` its id): ``body`` (the exact JSON bytes signed and sent,
    the same on every attempt) and ``status``: ``pending`` until a receiver acknowledged
    it (2xx: ``delivered``) or its retry window passed (``failed``). Deliveries with the
    same ``ordering_key`` (the run, or the workflow for workflow events) are sent one at a
    time in ``source_id`` order."""

    __tablename__ = "event_deliveries"
    __table_args__ = (
        UniqueConstraint("subscription_id", "source", "source_id"),
        Index(
            "ix_event_deliveries_pending",
            "subscription_id",
            "ordering_key",
            "source_id",
            postgresql_where=text("status = 'pending'"),
        ),
        Index("ix_event_deliveries_subscription", "subscription_id", "created_at", "id"),
        Index(
            "ix_event_deliveries_ended",
            "created_at",
            postgresql_where=text("status <> 'pending'"),
        ),
    )

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    subscription_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("event_subscriptions.id", ondelete="CASCADE")
    )
    source: Mapped[str] = mapped_column(String(10))
    source_id: Mapped[int] = mapped_column(BigInteger)
    event_type: Mapped[str] = mapped_column(String(60))
    ordering_key: Mapped[str] = mapped_column(String(80))
    run_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True), nullable=True)
    body: Mapped[bytes] = mapped_column(LargeBinary)
    status: Mapped[str] = mapped_column(String(12), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class DeliveryAttempt(Base):
    """One HTTP request of a delivery: when, what answered (``status_code``, the first
    bytes of ``response``) or why nothing did (``error``), how long it took (``duration_ms``),
    and whether a person asked for it (``manual``: a re-send from the UI or the API)."""

    __tablename__ = "event_delivery_attempts"
    __table_args__ = (Index("ix_event_delivery_attempts_delivery", "delivery_id", "id"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    delivery_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("event_deliveries.id", ondelete="CASCADE")
    )
    number: Mapped[int] = mapped_column(Integer)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    response: Mapped[str] = mapped_column(Text, default="", server_default=text("''"))
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    duration_ms: Mapped[int] = mapped_column(Integer)
    manual: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
