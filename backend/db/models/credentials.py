"""Credentials (encrypted secrets), pending OAuth2 authorizations, and the audit log.

``credentials.ciphertext`` is an AES-256-GCM blob from :mod:`backend.crypto` holding the
JSON of every field (secrets included) and, for OAuth2 credentials, the tokens; its
associated data is ``b"credential:<id>"``. ``key_id`` repeats the blob's key id so
``railyard rotate-key`` can select what still needs re-encrypting. ``public`` holds only
what may be shown: non-secret fields and masked hints of secret ones.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, ForeignKey, Index, LargeBinary, String, func
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base


def _uuid() -> uuid.UUID:
    return uuid.uuid4()


class Credential(Base):
    """A stored credential of a connector-declared type (``type``, e.g. ``smtp``)."""

    __tablename__ = "credentials"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    name: Mapped[str] = mapped_column(String(200))
    type: Mapped[str] = mapped_column(String(120), index=True)
    kind: Mapped[str] = mapped_column(String(20))
    ciphertext: Mapped[bytes] = mapped_column(LargeBinary)
    key_id: Mapped[str] = mapped_column(String(16), index=True)
    public: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    token_expires_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    created_by: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    project_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("projects.id", ondelete="SET NULL"), nullable=True, index=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now()
    )


class OAuthState(Base):
    """A pending OAuth2 authorization: the ``state`` sent to the provider (primary key),
    the PKCE verifier, which credential it fills and who started it. Single use; expires."""

    __tablename__ = "oauth_states"

    state: Mapped[str] = mapped_column(String(100), primary_key=True)
    credential_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("credentials.id", ondelete="CASCADE")
    )
    user_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), nullable=True
    )
    code_verifier: Mapped[str] = mapped_column(String(200))
    redirect_uri: Mapped[str] = mapped_column(String(2000))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class AuditLog(Base):
    """Who did what, when, from where: ``action`` (``credential.create``, ``run.cancel``, ...),
    the object it touched, the object's state ``before`` and ``after`` a change, and JSON
    details (never secrets). Written by :func:`backend.services.audit.record` only.

    Append-only in PostgreSQL: a trigger refuses UPDATE, DELETE and TRUNCATE; rows older
    than the retention leave only through ``audit_log_purge(keep_days)`` (migration
    ``0010_audit``)."""

    __tablename__ = "audit_log"
    __table_args__ = (
        Index("ix_audit_log_actor_at", "actor_user_id", "at"),
        Index("ix_audit_log_action_at", "action", "at"),
        Index("ix_audit_log_object", "object_type", "object_id", "id"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), index=True
    )
    actor_user_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    action: Mapped[str] = mapped_column(String(60))
    object_type: Mapped[str] = mapped_column(String(60))
    object_id: Mapped[str] = mapped_column(String(200), index=True)
    details: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    # the actor's email (or token/service name) when the row was written: users may be deleted
    actor_label: Mapped[str | None] = mapped_column(String(320), nullable=True)
    # client address and request id of the request that caused the change (None off-request)
    address: Mapped[str | None] = mapped_column(String(64), nullable=True)
    request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    before: Mapped[Any] = mapped_column(JSONB, nullable=True)
    after: Mapped[Any] = mapped_column(JSONB, nullable=True)
