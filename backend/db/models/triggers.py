"""Tables of the triggers: webhook secrets, deliveries, test calls, stored files, schedules,
schedule fires and API tokens. All timestamps are ``timestamptz`` in UTC.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
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
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base, _uuid

__all__ = [
    "ApiToken",
    "Schedule",
    "ScheduleFire",
    "StoredFile",
    "WebhookDelivery",
    "WebhookSecret",
    "WebhookTestCall",
]


class WebhookSecret(Base):
    """The write-only webhook secret of a workflow (token, password or HMAC key).

    ``ciphertext`` is AES-GCM output of :func:`backend.crypto.encrypt`; never rendered back.
    """

    __tablename__ = "webhook_secrets"

    workflow_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("workflows.id", ondelete="CASCADE"), primary_key=True
    )
    ciphertext: Mapped[bytes] = mapped_column(LargeBinary)
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now()
    )


class WebhookDelivery(Base):
    """Audit row of a webhook request that was rejected (401, 400, 404, 405, 413).

    Accepted requests are recorded as runs (``runs.trigger = 'webhook'``).
    """

    __tablename__ = "webhook_deliveries"
    __table_args__ = (Index("ix_webhook_deliveries_workflow", "workflow_id", "id"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    workflow_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("workflows.id", ondelete="CASCADE"))
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    method: Mapped[str] = mapped_column(String(10))
    status_code: Mapped[int] = mapped_column(Integer)
    outcome: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(Text, default="")
    test: Mapped[bool] = mapped_column(Boolean, default=False)


class WebhookTestCall(Base):
    """The last request received on a workflow's test URL (``/hooks/test/<token>``)."""

    __tablename__ = "webhook_test_calls"

    workflow_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("workflows.id", ondelete="CASCADE"), primary_key=True
    )
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    input: Mapped[Any] = mapped_column(JSONB, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class StoredFile(Base):
    """A file uploaded to a webhook (multipart/form-data); runs hold only a reference."""

    __tablename__ = "files"
    __table_args__ = (Index("ix_files_created", "created_at"),)

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    workflow_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("workflows.id", ondelete="CASCADE"), nullable=True, index=True
    )
    filename: Mapped[str] = mapped_column(String(500))
    content_type: Mapped[str] = mapped_column(String(200))
    size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    content: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Schedule(Base):
    """The schedule of a workflow whose active version starts with ``trigger.schedule``.

    ``definition`` is the trigger node's config; ``revision`` grows on every change, and a
    fire is claimed by ``UPDATE ... WHERE next_fire_at = :old AND revision = :rev``.
    """

    __tablename__ = "schedules"
    __table_args__ = (Index("ix_schedules_due", "next_fire_at", postgresql_where=text("enabled")),)

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    workflow_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("workflows.id", ondelete="CASCADE"), unique=True
    )
    version_number: Mapped[int] = mapped_column(Integer)
    definition: Mapped[dict[str, Any]] = mapped_column(JSONB)
    revision: Mapped[int] = mapped_column(Integer, default=1)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    anchor_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    next_fire_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now()
    )


class ScheduleFire(Base):
    """One claimed fire instant; unique per (schedule, instant), so a run per instant.

    ``lag_ms`` is ``started_at - fire_at`` in milliseconds.
    """

    __tablename__ = "schedule_fires"
    __table_args__ = (
        UniqueConstraint("schedule_id", "fire_at"),
        Index("ix_schedule_fires_pending", "claimed_at", postgresql_where=text("run_id is null")),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    schedule_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("schedules.id", ondelete="CASCADE"))
    revision: Mapped[int] = mapped_column(Integer)
    fire_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    claimed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    run_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("runs.id", ondelete="SET NULL"), nullable=True
    )
    lag_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    catch_up: Mapped[bool] = mapped_column(Boolean, default=False)


class ApiToken(Base):
    """A personal API token; only its SHA-256 is stored (the token is shown once)."""

    __tablename__ = "api_tokens"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    user_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(200))
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    # scopes (backend.auth.policy.Scope values): what requests with the token may do, never
    # more than the owner may; expires_at None means no expiry
    scopes: Mapped[list[str]] = mapped_column(
        JSONB, default=lambda: ["admin"], server_default=text("'[\"admin\"]'::jsonb")
    )
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
