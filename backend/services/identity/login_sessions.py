"""Login sessions: server-side, one row per signed-in browser (table ``sessions``).

The cookie holds a random token (32 bytes, URL-safe base64); the table holds only its
SHA-256, so a database dump does not sign anyone in. Each row also records the client's
address and user agent at sign-in, how it signed in (``password`` or ``oidc``) and when it
was last seen (refreshed at most once a minute). Sessions end at logout, at expiry
(``RAILYARD_SESSION_HOURS``), when revoked by an admin, by "sign out everywhere", and
when the account is deactivated or its password reset.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Session, User
from backend.services import audit
from backend.services.identity.identity import Account, Identity, identity_of

__all__ = [
    "SessionRow",
    "close",
    "end_all",
    "list_sessions",
    "open_session",
    "revoke",
    "session_id_of",
    "sign_out_everywhere",
    "user_for_session",
]

TOUCH_INTERVAL = timedelta(seconds=60)
"""``last_seen_at`` is written at most this often per session."""


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def open_session(
    session: AsyncSession,
    user: Account,
    hours: float,
    *,
    address: str | None = None,
    user_agent: str = "",
    method: str = "password",
) -> str:
    """Create a login session for ``user`` lasting ``hours``; returns the cookie token."""
    token = secrets.token_urlsafe(32)
    now = datetime.now(UTC)
    session.add(
        Session(
            token_hash=_token_hash(token),
            id=uuid.uuid4(),
            user_id=user.id,
            expires_at=now + timedelta(hours=hours),
            last_seen_at=now,
            address=address[:64] if address else None,
            user_agent=user_agent[:400],
            method=method,
        )
    )
    await session.flush()
    return token


async def user_for_session(session: AsyncSession, token: str) -> User | None:
    """The active user of a live session token, else ``None``; refreshes ``last_seen_at``
    when it is older than :data:`TOUCH_INTERVAL` (committed by this call)."""
    now = datetime.now(UTC)
    row = (
        await session.execute(
            select(User, Session.last_seen_at)
            .join(Session, Session.user_id == User.id)
            .where(
                Session.token_hash == _token_hash(token),
                Session.expires_at > now,
                User.is_active.is_(True),
            )
        )
    ).first()
    if row is None:
        return None
    user, last_seen = row
    if last_seen < now - TOUCH_INTERVAL:
        await session.execute(
            update(Session).where(Session.token_hash == _token_hash(token)).values(last_seen_at=now)
        )
        await session.commit()
    return user


async def identity_for_session(session: AsyncSession, token: str) -> Identity | None:
    """:func:`user_for_session` as the request's
    :class:`~backend.services.identity.identity.Identity`."""
    user = await user_for_session(session, token)
    return None if user is None else identity_of(user)


async def session_id_of(session: AsyncSession, token: str) -> uuid.UUID | None:
    """The id of the session of cookie ``token`` (to mark "this session" in lists)."""
    query = select(Session.id).where(Session.token_hash == _token_hash(token))
    return (await session.execute(query)).scalar_one_or_none()


async def close(session: AsyncSession, token: str) -> uuid.UUID | None:
    """Log out: delete the session of ``token``; audits ``auth.logout`` and returns the
    user id when there was one."""
    user_id = (
        await session.execute(
            delete(Session)
            .where(Session.token_hash == _token_hash(token))
            .returning(Session.user_id)
        )
    ).scalar_one_or_none()
    if user_id is not None:
        await audit.record(session, "auth.logout", "user", user_id)
    return user_id


async def end_all(session: AsyncSession, user_id: uuid.UUID) -> int:
    """Delete every session of ``user_id`` (not audited: the caller audits why)."""
    result = await session.execute(delete(Session).where(Session.user_id == user_id))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


async def sign_out_everywhere(session: AsyncSession, user_id: uuid.UUID) -> int:
    """End every session of ``user_id`` (by the user or an admin); audits
    ``session.revoke`` on the user with ``details.sessions`` = how many ended."""
    ended = await end_all(session, user_id)
    await audit.record(
        session, "session.revoke", "user", user_id, details={"all": True, "sessions": ended}
    )
    return ended


@dataclass(frozen=True)
class SessionRow:
    """A live session as shown to admins (never the token or its hash)."""

    id: uuid.UUID
    user_id: uuid.UUID
    email: str
    display_name: str
    address: str | None
    user_agent: str
    method: str
    created_at: datetime
    last_seen_at: datetime
    expires_at: datetime


async def list_sessions(
    session: AsyncSession, user_id: uuid.UUID | None = None
) -> list[SessionRow]:
    """Live sessions (of ``user_id`` when given), most recently seen first."""
    query = (
        select(Session, User.email, User.display_name)
        .join(User, User.id == Session.user_id)
        .where(Session.expires_at > datetime.now(UTC))
        .order_by(Session.last_seen_at.desc())
    )
    if user_id is not None:
        query = query.where(Session.user_id == user_id)
    return [
        SessionRow(
            id=s.id,
            user_id=s.user_id,
            email=email,
            display_name=name,
            address=s.address,
            user_agent=s.user_agent,
            method=s.method,
            created_at=s.created_at,
            last_seen_at=s.last_seen_at,
            expires_at=s.expires_at,
        )
        for s, email, name in await session.execute(query)
    ]


async def revoke(
    session: AsyncSession, session_id: uuid.UUID, *, user_id: uuid.UUID | None = None
) -> bool:
    """End one session by its id (only ``user_id``'s when given); audits
    ``session.revoke``. False when there is no such session."""
    query = delete(Session).where(Session.id == session_id)
    if user_id is not None:
        query = query.where(Session.user_id == user_id)
    owner = (await session.execute(query.returning(Session.user_id))).scalar_one_or_none()
    if owner is None:
        return False
    await audit.record(
        session, "session.revoke", "session", session_id, details={"user_id": str(owner)}
    )
    return True
