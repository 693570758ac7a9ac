"""API tokens: ``Authorization: Bearer <token>`` for scripts and service accounts.

A token is ``ry_`` + 32 random URL-safe bytes, shown once at creation; only its SHA-256 is
stored (``api_tokens.sha256``). ``last_used_at`` is updated on use. Each token has scopes
(``read``, ``run``, ``edit``, ``admin``: :class:`backend.auth.policy.Scope`) and an optional
expiry; a request with it may do only what both the scopes and the owner's role and
grants allow (:mod:`backend.auth.policy`). Creating and revoking are audited
(``token.create``/``token.revoke``).
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from backend.auth.policy import Scope, parse_role, scopes_for_role
from backend.db.models import ApiToken, User
from backend.services import audit
from backend.services.identity.identity import Account, Identity, identity_of
from backend.services.timestamps import rfc3339

PREFIX = "ry_"
SCOPES = tuple(s.value for s in Scope)


class TokenError(ValueError):
    """Invalid token input (name, scopes, expiry); ``field`` names the offending field."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def hash_token(token: str) -> str:
    """Hex SHA-256 of the token text."""
    return hashlib.sha256(token.encode()).hexdigest()


def _snapshot(row: ApiToken) -> dict[str, object]:
    return {
        "name": row.name,
        "user_id": str(row.user_id),
        "scopes": list(row.scopes),
        "expires_at": rfc3339(row.expires_at),
    }


def clean_scopes(scopes: Iterable[str]) -> list[str]:
    """The scopes, validated and in canonical order; raises :class:`TokenError` when one is
    unknown or none is given."""
    given = [s.strip() for s in scopes if s.strip()]
    unknown = [s for s in given if s not in SCOPES]
    if unknown:
        raise TokenError(f"unknown scope {unknown[0]!r}: use {', '.join(SCOPES)}", "scopes")
    if not given:
        raise TokenError("a token needs at least one scope", "scopes")
    return [s for s in SCOPES if s in given]


async def create_token(
    session: AsyncSession,
    user_id: uuid.UUID,
    name: str,
    *,
    scopes: Iterable[str] = ("admin",),
    expires_at: datetime | None = None,
    now: datetime | None = None,
    role: str | None = None,
) -> tuple[ApiToken, str]:
    """Create a token for ``user_id``; returns the row and the token text (not stored).

    Raises :class:`TokenError` for an empty or over-long name, unknown scopes, a scope
    stronger than ``role`` allows (when given), or an expiry in the past (when ``now`` is
    given)."""
    name = name.strip()
    if not name or len(name) > 200:
        raise TokenError("a token needs a name of 1 to 200 characters", "name")
    scope_list = clean_scopes(scopes)
    if role is not None:
        allowed = [s.value for s in scopes_for_role(parse_role(role))]
        beyond = [s for s in scope_list if s not in allowed]
        if beyond:
            raise TokenError(
                f"the {role} role allows at most these scopes: {', '.join(allowed)}", "scopes"
            )
    if expires_at is not None and now is not None and expires_at <= now:
        raise TokenError("the expiry must be in the future", "expires_at")
    token = PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(
        user_id=user_id,
        name=name,
        sha256=hash_token(token),
        scopes=scope_list,
        expires_at=expires_at,
    )
    session.add(row)
    await session.flush()
    await audit.record(session, "token.create", "token", row.id, after=_snapshot(row))
    return row, token


async def list_tokens(session: AsyncSession, user_id: uuid.UUID) -> list[ApiToken]:
    """The user's tokens, newest first (hashes only)."""
    rows = await session.execute(
        select(ApiToken).where(ApiToken.user_id == user_id).order_by(ApiToken.created_at.desc())
    )
    return list(rows.scalars())


async def list_all_tokens(session: AsyncSession) -> list[tuple[ApiToken, User]]:
    """Every token with its owner, newest first (for admins)."""
    rows = await session.execute(
        select(ApiToken, User)
        .join(User, User.id == ApiToken.user_id)
        .order_by(ApiToken.created_at.desc())
    )
    return [(t, u) for t, u in rows]


async def revoke_token(
    session: AsyncSession, user_id: uuid.UUID | None, token_id: uuid.UUID
) -> bool:
    """Delete a token (one of ``user_id``'s, or any when ``user_id`` is None); False when
    it does not exist."""
    row = await session.get(ApiToken, token_id)
    if row is None or (user_id is not None and row.user_id != user_id):
        return False
    before = _snapshot(row)
    await session.delete(row)
    await session.flush()
    await audit.record(session, "token.revoke", "token", token_id, before=before)
    return True


async def token_owner(
    session: AsyncSession, token: str, now: datetime
) -> tuple[User, list[str]] | None:
    """The active owner of an unexpired ``token`` and the token's scopes (the token is
    marked used), or ``None``."""
    if not token.startswith(PREFIX):
        return None
    row = (
        await session.execute(select(ApiToken).where(ApiToken.sha256 == hash_token(token)))
    ).scalar_one_or_none()
    if row is None or (row.expires_at is not None and row.expires_at <= now):
        return None
    user = await session.get(User, row.user_id)
    if user is None or not user.is_active:
        return None
    await session.execute(update(ApiToken).where(ApiToken.id == row.id).values(last_used_at=now))
    return user, list(row.scopes)


async def token_identity(
    session: AsyncSession, token: str, now: datetime
) -> tuple[Identity, list[str]] | None:
    """:func:`token_owner` with the owner as a
    :class:`~backend.services.identity.identity.Identity`."""
    found = await token_owner(session, token, now)
    return None if found is None else (identity_of(found[0]), found[1])


async def user_for_token(session: AsyncSession, token: str, now: datetime) -> User | None:
    """The active owner of an unexpired ``token`` (see :func:`token_owner`), or ``None``."""
    found = await token_owner(session, token, now)
    return found[0] if found else None


MAX_EXPIRY_DAYS = 3650


async def create_for(
    session: AsyncSession,
    owner: Account,
    name: str,
    scopes: Iterable[str] | None,
    expires_in_days: int | None,
) -> tuple[ApiToken, str]:
    """Create a token for ``owner`` from request fields: ``scopes`` default to the
    strongest its role allows; ``expires_in_days`` 0/None means no expiry (1..3650).
    Raises :class:`TokenError`."""
    role = parse_role(owner.role)
    chosen = list(scopes) if scopes is not None else [scopes_for_role(role)[-1].value]
    expires_at = None
    if expires_in_days:
        if not 0 < expires_in_days <= MAX_EXPIRY_DAYS:
            raise TokenError(f"expiry must be 1 to {MAX_EXPIRY_DAYS} days", "expires_in_days")
        expires_at = datetime.now(UTC) + timedelta(days=expires_in_days)
    return await create_token(
        session, owner.id, name, scopes=chosen, expires_at=expires_at, role=owner.role
    )
