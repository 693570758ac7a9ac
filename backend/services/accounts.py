"""Local accounts and login sessions (argon2id passwords, server-side sessions)."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from datetime import UTC, datetime, timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Session, User

# argon2-cffi's defaults follow RFC 9106's second recommended option (argon2id, 64 MiB).
_HASHER = PasswordHasher()


def hash_password(password: str) -> str:
    """argon2id hash of ``password`` (PHC string)."""
    return _HASHER.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    """True when ``password`` matches; never raises on a malformed hash."""
    try:
        return _HASHER.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def create_user(
    session: AsyncSession, email: str, password: str, *, role: str = "editor", name: str = ""
) -> User:
    """Create a local user; the email is stored lower-cased."""
    user = User(
        email=email.strip().lower(),
        display_name=name or email.split("@")[0],
        password_hash=hash_password(password),
        role=role,
    )
    session.add(user)
    await session.flush()
    return user


async def count_users(session: AsyncSession) -> int:
    """Number of accounts."""
    return int((await session.execute(select(func.count(User.id)))).scalar_one())


async def authenticate(session: AsyncSession, email: str, password: str) -> User | None:
    """The active user with these credentials, else None (same cost either way)."""
    user = (
        await session.execute(select(User).where(User.email == email.strip().lower()))
    ).scalar_one_or_none()
    if user is None:
        hash_password(password)  # spend the same time as a real check
        return None
    if not user.is_active or not verify_password(user.password_hash, password):
        return None
    if user.kind == "service":  # service accounts act only through API tokens
        return None
    return user


async def open_session(session: AsyncSession, user: User, hours: float) -> str:
    """Create a login session; returns the cookie token (only its SHA-256 is stored)."""
    token = secrets.token_urlsafe(32)
    session.add(
        Session(
            token_hash=_token_hash(token),
            user_id=user.id,
            expires_at=datetime.now(UTC) + timedelta(hours=hours),
        )
    )
    await session.flush()
    return token


async def user_for_session(session: AsyncSession, token: str) -> User | None:
    """The user of a live session token, else None."""
    row = (
        await session.execute(
            select(User)
            .join(Session, Session.user_id == User.id)
            .where(
                Session.token_hash == _token_hash(token),
                Session.expires_at > datetime.now(UTC),
                User.is_active.is_(True),
            )
        )
    ).scalar_one_or_none()
    return row


async def close_session(session: AsyncSession, token: str) -> None:
    """Log out: delete the session."""
    await session.execute(delete(Session).where(Session.token_hash == _token_hash(token)))


async def get_user(session: AsyncSession, user_id: uuid.UUID) -> User | None:
    """User by id."""
    return await session.get(User, user_id)
