"""Identity tables: single sign-on links, login throttling, password reset links and
pending OIDC logins. All timestamps are ``timestamptz`` in UTC.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Integer, String, UniqueConstraint, func
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base, _uuid

__all__ = ["LoginThrottle", "OidcLogin", "PasswordReset", "UserIdentity"]


class UserIdentity(Base):
    """A user's account at an OpenID Connect provider: the ``(issuer, subject)`` pair of
    its id_tokens (never the email alone) links the provider's account to ``user_id``."""

    __tablename__ = "user_identities"
    __table_args__ = (UniqueConstraint("issuer", "subject"),)

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    user_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    issuer: Mapped[str] = mapped_column(String(500))
    subject: Mapped[str] = mapped_column(String(255))
    email: Mapped[str] = mapped_column(String(320), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_login_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class LoginThrottle(Base):
    """Failed-login counter of one account (``scope='account'``, ``key`` = the attempted
    email, lower-cased) or one client address (``scope='address'``): ``failures`` since
    ``window_start``; ``locked_until`` set while sign-in is refused. Shared by every API
    process through PostgreSQL (see :mod:`backend.services.identity.login_throttle`)."""

    __tablename__ = "login_throttle"

    scope: Mapped[str] = mapped_column(String(10), primary_key=True)
    key: Mapped[str] = mapped_column(String(320), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    window_start: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    locked_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class PasswordReset(Base):
    """A one-time link to set a password (``purpose``: ``reset`` by an admin, or
    ``invite`` for a new account); only the SHA-256 of the link's token is stored."""

    __tablename__ = "password_resets"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    purpose: Mapped[str] = mapped_column(String(10), default="reset")
    created_by: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class OidcLogin(Base):
    """A single sign-on in progress: the ``state`` sent to the provider (primary key), the
    id_token ``nonce``, the PKCE ``code_verifier`` and where to go afterwards. Single use;
    expires after ten minutes."""

    __tablename__ = "oidc_logins"

    state: Mapped[str] = mapped_column(String(100), primary_key=True)
    nonce: Mapped[str] = mapped_column(String(100))
    code_verifier: Mapped[str] = mapped_column(String(200))
    next_path: Mapped[str] = mapped_column(String(2000), default="/workflows")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
