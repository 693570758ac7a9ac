"""API tokens: ``Authorization: Bearer <token>`` for scripts (e.g. starting runs).

A token is ``ry_`` + 32 random URL-safe bytes, shown once at creation; only its SHA-256 is
stored (``api_tokens.sha256``). ``last_used_at`` is updated on use.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import ApiToken, User

PREFIX = "ry_"


def hash_token(token: str) -> str:
    """Hex SHA-256 of the token text."""
    return hashlib.sha256(token.encode()).hexdigest()


async def create_token(
    session: AsyncSession, user_id: uuid.UUID, name: str
) -> tuple[ApiToken, str]:
    """Create a token; returns the row and the token text (not stored anywhere)."""
    name = name.strip()
    if not name or len(name) > 200:
        raise ValueError("a token needs a name of 1 to 200 characters")
    token = PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(user_id=user_id, name=name, sha256=hash_token(token))
    session.add(row)
    await session.flush()
    return row, token


async def list_tokens(session: AsyncSession, user_id: uuid.UUID) -> list[ApiToken]:
    """The user's tokens, newest first (hashes only)."""
    rows = await session.execute(
        select(ApiToken).where(ApiToken.user_id == user_id).order_by(ApiToken.created_at.desc())
    )
    return list(rows.scalars())


async def revoke_token(session: AsyncSession, user_id: uuid.UUID, token_id: uuid.UUID) -> bool:
    """Delete one of the user's tokens; False when it does not exist."""
    result = await session.execute(
        delete(ApiToken).where(ApiToken.id == token_id, ApiToken.user_id == user_id)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def user_for_token(session: AsyncSession, token: str, now: datetime) -> User | None:
    """The active user owning ``token`` (and mark the token used), or ``None``."""
    if not token.startswith(PREFIX):
        return None
    row = (
        await session.execute(select(ApiToken).where(ApiToken.sha256 == hash_token(token)))
    ).scalar_one_or_none()
    if row is None:
        return None
    user = await session.get(User, row.user_id)
    if user is None or not user.is_active:
        return None
    await session.execute(update(ApiToken).where(ApiToken.id == row.id).values(last_used_at=now))
    return user
