"""Tables of the triggers: webhook secrets, deliveries, test calls, stored files, schedules,
schedule fires, API tokens, and the event service's subscriptions, inbox, registrations to
retire and dead letters. All timestamps are ``timestamptz`` in UTC.
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
    "TriggerDeadLetter",
    "TriggerEventRow",
    "TriggerRetirement",
    "TriggerSubscription",
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


class TriggerSubscription(Base):
    """What the event service runs for a workflow whose active version starts with a
    connector trigger of kind ``app_webhook``, ``polling``, ``broker`` or ``email``.

    One row per workflow (like :class:`Schedule`), following the active version:
    ``revision`` grows when the trigger's type or config changes. ``token`` is the
    app webhook's URL path (``/hooks/app/<token>``), kept across versions.

    Polling: ``cursor`` is the connector's cursor, changed only in the transaction that
    stores the events it produced (``baseline_taken`` False: the first poll stores the
    cursor and starts no run, unless ``include_existing``); ``next_poll_at`` is when the
    poller claims it next. App webhooks: ``registration`` is the AES-GCM-encrypted
    :class:`connectors.sdk.Registration` (``registration_status``: ``none``, ``pending``,
    ``registered``, ``failed``), ``next_check_at`` when the lifecycle loop runs next.
    Broker and email: ``lease_owner`` / ``lease_until`` say which events process holds
    the subscription. ``last_*`` feed the workflow page's status line.

    ``sample_until`` / ``sample``: the designer's "Fetch test event" window of an app
    webhook (:mod:`backend.services.triggers.events.samples`). A workflow never published gets a
    row for it with ``enabled`` False and ``version_number`` 0, so its trigger URL exists
    (and stays the same) before the first publish.
    """

    __tablename__ = "trigger_subscriptions"
    __table_args__ = (
        Index("ix_trigger_subscriptions_poll", "next_poll_at", postgresql_where=text("enabled")),
        Index("ix_trigger_subscriptions_check", "next_check_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    workflow_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("workflows.id", ondelete="CASCADE"), unique=True
    )
    token: Mapped[str] = mapped_column(String(64), unique=True)
    version_number: Mapped[int] = mapped_column(Integer)
    step_id: Mapped[str] = mapped_column(String(200))
    node_type: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20))
    config: Mapped[dict[str, Any]] = mapped_column(JSONB)
    revision: Mapped[int] = mapped_column(Integer, default=1)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    interval_seconds: Mapped[float] = mapped_column(Float, default=300.0)
    include_existing: Mapped[bool] = mapped_column(Boolean, default=False)
    cursor: Mapped[Any] = mapped_column(JSONB, nullable=True)
    baseline_taken: Mapped[bool] = mapped_column(Boolean, default=False)
    next_poll_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    registration: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    registration_status: Mapped[str] = mapped_column(String(20), default="none")
    next_check_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    lease_owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_polled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_event_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    last_error_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    sample_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    sample: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now()
    )


class TriggerRetirement(Base):
    """An app webhook registration to delete at the vendor: its workflow's version was
    replaced by one with another trigger config, or the workflow was archived or
    deactivated. ``config`` is the config it was registered with; the lifecycle loop
    retries the ``unregister`` hook with backoff (``attempts``, ``next_attempt_at``)."""

    __tablename__ = "trigger_retirements"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    workflow_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("workflows.id", ondelete="CASCADE"))
    node_type: Mapped[str] = mapped_column(String(200))
    config: Mapped[dict[str, Any]] = mapped_column(JSONB)
    version_number: Mapped[int] = mapped_column(Integer)
    registration: Mapped[bytes] = mapped_column(LargeBinary)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)


class TriggerEventRow(Base):
    """The inbox: one row per event a connector trigger heard, unique per
    ``(workflow_id, dedupe_key)`` so a redelivered or re-polled event is stored once.

    Stored (with a polling trigger's new cursor) in one transaction; its run is started
    with the idempotency key ``trigger-event:<id>`` and ``run_id`` set after. ``data`` is
    the run input until the run is stored (then NULL); ``meta`` is what the run page
    shows (delivery id, message id, Message-ID). ``error`` says why a row starts no run:
    its start failed for good, or it is a polling trigger's baseline (an item there before
    the trigger was activated, remembered so that it never starts one).
    """

    __tablename__ = "trigger_events"
    __table_args__ = (
        UniqueConstraint("workflow_id", "dedupe_key"),
        Index("ix_trigger_events_pending", "received_at", postgresql_where=text("run_id is null")),
        Index("ix_trigger_events_run", "run_id", postgresql_where=text("run_id is not null")),
        Index("ix_trigger_events_received", "received_at"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    workflow_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("workflows.id", ondelete="CASCADE"))
    version_number: Mapped[int] = mapped_column(Integer)
    node_type: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20))
    dedupe_key: Mapped[str] = mapped_column(String(200))
    data: Mapped[Any] = mapped_column(JSONB, nullable=True)
    meta: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    run_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class TriggerDeadLetter(Base):
    """A message a listening trigger could not turn into an event (not decodable, no id,
    too large), kept for the user on the workflow page instead of being lost.
    ``raw`` is the message text (bytes that are not UTF-8 as base64, ``encoding`` says
    which), cut to 64 KiB."""

    __tablename__ = "trigger_dead_letters"
    __table_args__ = (Index("ix_trigger_dead_letters_workflow", "workflow_id", "id"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    workflow_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("workflows.id", ondelete="CASCADE"))
    node_type: Mapped[str] = mapped_column(String(200))
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    reason: Mapped[str] = mapped_column(Text)
    raw: Mapped[str] = mapped_column(Text)
    encoding: Mapped[str] = mapped_column(String(10), default="utf-8")
    meta: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
