"""One-time links to set a password: admin-initiated resets and invitations.

An admin resets a user's password (``purpose="reset"``): the old password stops working at
once, every session of the user ends, the account's sign-in lockout is cleared, and a link
``<base url>/reset-password/<token>`` valid for ``RAILYARD_PASSWORD_LINK_HOURS`` is shown
to the admin (once) to hand to the user. Creating a user without a password makes an
invitation link the same way (``purpose="invite"``). Opening the link lets the user choose
a password that meets the policy; the link then stops working. Issuing a new link voids
the user's earlier unused ones. Only the SHA-256 of a link's token is stored.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import PasswordReset, User
from backend.services import audit
from backend.services.identity import login_sessions, login_throttle
from backend.services.identity.accounts import AccountError
from backend.services.identity.passwords import check_password, hash_password
from backend.services.timestamps import rfc3339
from backend.settings import Settings

__all__ = [
    "InvalidLink",
    "IssuedLink",
    "issue",
    "issue_link",
    "link_url",
    "redeem",
    "user_for_link",
]


class InvalidLink(Exception):
    """The link is unknown, used, expired, or its account is deactivated."""


def link_url(base_url: str, token: str) -> str:
    """The address of a link: ``<base url>/reset-password/<token>``."""
    return f"{base_url.rstrip('/')}/reset-password/{token}"


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def issue(
    session: AsyncSession,
    user_id: uuid.UUID,
    *,
    hours: float,
    purpose: str = "reset",
    created_by: uuid.UUID | None = None,
) -> tuple[str, datetime]:
    """Make a one-time link token for ``user_id``; returns ``(token, expires_at)``.

    ``purpose="reset"`` also removes the current password, ends every session and clears
    the sign-in lockout, and audits ``user.password_reset``. Raises :class:`AccountError`
    (404) for an unknown user, (409) for a deactivated one.
    """
    user = await session.get(User, user_id, with_for_update=True)
    if user is None:
        raise AccountError("no such user", status=404)
    if not user.is_active:
        raise AccountError("reactivate the account first", status=409)
    if user.kind == "service":
        raise AccountError("service accounts have no password; use API tokens", status=409)
    now = datetime.now(UTC)
    await session.execute(
        delete(PasswordReset).where(
            PasswordReset.user_id == user_id, PasswordReset.used_at.is_(None)
        )
    )
    token = secrets.token_urlsafe(32)
    expires_at = now + timedelta(hours=hours)
    session.add(
        PasswordReset(
            token_hash=_hash(token),
            user_id=user_id,
            purpose=purpose,
            created_by=created_by,
            expires_at=expires_at,
        )
    )
    details: dict[str, object] = {"stage": "issued", "purpose": purpose}
    if purpose == "reset":
        user.password_hash = None
        details["sessions_ended"] = await login_sessions.end_all(session, user_id)
        await login_throttle.clear(session, user.email)
    await session.flush()
    await audit.record(
        session,
        "user.password_reset",
        "user",
        user_id,
        details={**details, "expires_at": rfc3339(expires_at)},
    )
    return token, expires_at


@dataclass(frozen=True)
class IssuedLink:
    """A link to hand to its user (shown once): ``url``, when it ``expires_at`` (UTC) and
    its ``purpose`` (``reset`` or ``invite``)."""

    url: str
    expires_at: datetime
    purpose: str


async def issue_link(
    session: AsyncSession,
    settings: Settings,
    user_id: uuid.UUID,
    *,
    purpose: str,
    created_by: uuid.UUID | None,
) -> IssuedLink:
    """:func:`issue` with the lifetime ``RAILYARD_PASSWORD_LINK_HOURS``, as a full URL."""
    token, expires_at = await issue(
        session,
        user_id,
        hours=settings.password_link_hours,
        purpose=purpose,
        created_by=created_by,
    )
    return IssuedLink(link_url(settings.base_url, token), expires_at, purpose)


async def _live(session: AsyncSession, token: str, now: datetime) -> tuple[PasswordReset, User]:
    row = (
        await session.execute(
            select(PasswordReset, User)
            .join(User, User.id == PasswordReset.user_id)
            .where(PasswordReset.token_hash == _hash(token))
            .with_for_update(of=PasswordReset)
        )
    ).first()
    if row is None:
        raise InvalidLink("this link is not valid; ask an admin for a new one")
    link, user = row
    if link.used_at is not None or link.expires_at <= now or not user.is_active:
        raise InvalidLink("this link has expired or was used; ask an admin for a new one")
    return link, user


async def user_for_link(session: AsyncSession, token: str) -> User:
    """The account a live link sets the password of; raises :class:`InvalidLink`."""
    return (await _live(session, token, datetime.now(UTC)))[1]


async def redeem(session: AsyncSession, token: str, password: str) -> User:
    """Set the password through a live link (policy checked: raises
    :class:`~backend.services.identity.passwords.WeakPassword`), use up the link and end every
    session of the user. Raises :class:`InvalidLink`. Audits ``user.password_reset``."""
    now = datetime.now(UTC)
    link, user = await _live(session, token, now)
    check_password(password, email=user.email)
    user.password_hash = hash_password(password)
    user.password_changed_at = now
    link.used_at = now
    ended = await login_sessions.end_all(session, user.id)
    await session.flush()
    await audit.record(
        session,
        "user.password_reset",
        "user",
        user.id,
        actor_user_id=user.id,
        actor_label=user.email,
        details={"stage": "completed", "purpose": link.purpose, "sessions_ended": ended},
    )
    return user
