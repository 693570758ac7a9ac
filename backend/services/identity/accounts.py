"""Accounts: create, sign in (throttled), change role, deactivate and reactivate.

Passwords are argon2id hashes checked against the policy of
:mod:`backend.services.identity.passwords`; sign-in failures are counted by
:mod:`backend.services.identity.login_throttle`; sessions live in
:mod:`backend.services.identity.login_sessions`; reset and invitation links in
:mod:`backend.services.identity.password_links`. Every change is audited (``user.*``,
``auth.*``) in the caller's transaction.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.auth.policy import Role
from backend.db.models import Session, User, UserIdentity
from backend.services import audit
from backend.services.identity import login_sessions, login_throttle
from backend.services.identity.login_throttle import Lock, ThrottlePolicy
from backend.services.identity.passwords import check_password, hash_password, verify_password
from backend.services.timestamps import rfc3339

__all__ = [
    "ROLES",
    "AccountError",
    "SignIn",
    "UserRow",
    "count_active_admins",
    "count_users",
    "create_user",
    "get_user",
    "list_users",
    "record_login",
    "set_active",
    "set_role",
    "sign_in",
    "snapshot",
    "update_profile",
    "user_row",
]

ROLES = tuple(role.value for role in Role)
"""The roles a user may hold, most powerful first (docs/security.md has what each may do)."""

_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s]+\.[^@\s]+$")


class AccountError(ValueError):
    """A refused account change: ``str(exc)`` is the message, ``field`` the input at fault;
    ``status`` is 404 for an unknown user, 409 for a conflict, else 400."""

    def __init__(self, message: str, *, field: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.field = field
        self.status = status


def snapshot(user: User) -> dict[str, Any]:
    """The audited, non-secret fields of ``user``."""
    return {
        "id": str(user.id),
        "email": user.email,
        "display_name": user.display_name,
        "role": user.role,
        "is_active": user.is_active,
    }


def normalize_email(email: str) -> str:
    """Lower-cased, trimmed email; raises :class:`AccountError` when it is not one."""
    value = email.strip().lower()
    if len(value) > 320 or not _EMAIL.match(value):
        raise AccountError("enter a valid email address", field="email")
    return value


def _check_role(role: str) -> str:
    if role not in ROLES:
        raise AccountError(f"role must be one of {', '.join(ROLES)}", field="role")
    return role


async def create_user(
    session: AsyncSession,
    email: str,
    password: str | None,
    *,
    role: str = "editor",
    name: str = "",
) -> User:
    """Create an account (email stored lower-cased) and audit ``user.create``.

    ``password`` must meet the policy (raises
    :class:`~backend.services.identity.passwords.WeakPassword`);
    ``None`` creates an account without a local password (to be set through an invitation
    link, or for single sign-on). Raises :class:`AccountError` for a malformed email, an
    unknown role or an email already in use (status 409).
    """
    address = normalize_email(email)
    _check_role(role)
    if password is not None:
        check_password(password, email=address)
    taken = await session.execute(select(User.id).where(User.email == address))
    if taken.first() is not None:
        raise AccountError("an account with this email exists", field="email", status=409)
    now = datetime.now(UTC)
    user = User(
        email=address,
        display_name=(name.strip() or address.split("@")[0])[:200],
        password_hash=hash_password(password) if password is not None else None,
        password_changed_at=now if password is not None else None,
        role=role,
        is_active=True,
        external_groups=[],
    )
    session.add(user)
    await session.flush()
    await audit.record(session, "user.create", "user", user.id, after=snapshot(user))
    return user


async def count_users(session: AsyncSession) -> int:
    """Number of accounts."""
    return int((await session.execute(select(func.count(User.id)))).scalar_one())


async def get_user(session: AsyncSession, user_id: uuid.UUID) -> User | None:
    """User by id."""
    return await session.get(User, user_id)


async def _existing(session: AsyncSession, user_id: uuid.UUID, *, lock: bool = False) -> User:
    user = await session.get(User, user_id, with_for_update=lock)
    if user is None:
        raise AccountError("no such user", status=404)
    return user


@dataclass
class UserRow:
    """A user with the number of live sessions and whether it signs in by SSO."""

    user: User
    sessions: int
    sso: bool


async def list_users(session: AsyncSession, user_id: uuid.UUID | None = None) -> list[UserRow]:
    """Every account (active first, then by email; only ``user_id`` when given) with its
    live session count and whether it is linked to the identity provider."""
    now = datetime.now(UTC)
    live = (
        select(func.count(Session.token_hash))
        .where(Session.user_id == User.id, Session.expires_at > now)
        .scalar_subquery()
    )
    sso = select(func.count(UserIdentity.id)).where(UserIdentity.user_id == User.id)
    query = select(User, live, sso.scalar_subquery()).order_by(User.is_active.desc(), User.email)
    if user_id is not None:
        query = query.where(User.id == user_id)
    return [UserRow(user, int(n), bool(s)) for user, n, s in await session.execute(query)]


async def user_row(session: AsyncSession, user_id: uuid.UUID) -> UserRow:
    """One account as :func:`list_users` shows it; raises :class:`AccountError` (404)."""
    rows = await list_users(session, user_id)
    if not rows:
        raise AccountError("no such user", status=404)
    return rows[0]


async def count_active_admins(session: AsyncSession) -> int:
    """Number of active accounts with the admin role."""
    query = select(func.count(User.id)).where(User.role == "admin", User.is_active.is_(True))
    return int((await session.execute(query)).scalar_one())


async def set_role(session: AsyncSession, user_id: uuid.UUID, role: str) -> User:
    """Change a user's role (audit ``user.role_change``); refuses to demote the last active
    admin (status 409). Raises :class:`AccountError`."""
    _check_role(role)
    user = await _existing(session, user_id, lock=True)
    if user.role == role:
        return user
    if user.role == "admin" and user.is_active and await count_active_admins(session) <= 1:
        raise AccountError("the last active admin cannot be demoted", field="role", status=409)
    before = snapshot(user)
    user.role = role
    await session.flush()
    await audit.record(
        session, "user.role_change", "user", user.id, before=before, after=snapshot(user)
    )
    return user


async def update_profile(session: AsyncSession, user_id: uuid.UUID, *, display_name: str) -> User:
    """Change a user's display name (1-200 characters; audit ``user.update``)."""
    name = display_name.strip()
    if not name or len(name) > 200:
        raise AccountError("a name has 1 to 200 characters", field="display_name")
    user = await _existing(session, user_id, lock=True)
    before = snapshot(user)
    user.display_name = name
    await session.flush()
    await audit.record(session, "user.update", "user", user.id, before=before, after=snapshot(user))
    return user


async def set_active(
    session: AsyncSession,
    user_id: uuid.UUID,
    active: bool,
    *,
    actor_id: uuid.UUID | None = None,
) -> User:
    """Deactivate (``active=False``: every session ends; sessions, API tokens and single
    sign-on stop working) or reactivate an account; audit ``user.deactivate`` /
    ``user.reactivate``. Refuses (409) to deactivate the last active admin, or the acting
    admin's own account (``actor_id``)."""
    if not active and actor_id == user_id:
        raise AccountError("you cannot deactivate your own account", status=409)
    user = await _existing(session, user_id, lock=True)
    if user.is_active == active:
        return user
    if not active and user.role == "admin" and await count_active_admins(session) <= 1:
        raise AccountError("the last active admin cannot be deactivated", status=409)
    before = snapshot(user)
    user.is_active = active
    await session.flush()
    ended = 0 if active else await login_sessions.end_all(session, user.id)
    await audit.record(
        session,
        "user.reactivate" if active else "user.deactivate",
        "user",
        user.id,
        before=before,
        after=snapshot(user),
        details={} if active else {"sessions_ended": ended},
    )
    return user


async def record_login(
    session: AsyncSession, user: User, now: datetime, details: dict[str, Any]
) -> None:
    """Note a successful sign-in: ``last_login_at`` and the ``auth.login`` audit row
    (acting as the user; ``details.method`` says how)."""
    user.last_login_at = now
    await audit.record(
        session,
        "auth.login",
        "user",
        user.id,
        actor_user_id=user.id,
        actor_label=user.email,
        details=details,
    )


@dataclass(frozen=True)
class SignIn:
    """Outcome of :func:`sign_in`: ``user`` when it succeeded; ``lock`` when refused by
    throttling (answer 429 with ``Retry-After``); neither for wrong credentials."""

    user: User | None = None
    lock: Lock | None = None


async def sign_in(
    session: AsyncSession,
    email: str,
    password: str,
    *,
    address: str | None,
    policy: ThrottlePolicy,
    now: datetime | None = None,
) -> SignIn:
    """Check a password sign-in, throttled per account and per address.

    Unknown email, wrong password, no local password and a deactivated account all give
    the same ``SignIn()`` (and take the time of one argon2 check); each is counted as a
    failure and audited as ``auth.login_failed`` (``object_id`` = the attempted email,
    ``details.reason`` for admins). A locked account or address gives ``SignIn(lock=...)``
    without checking the password. A failure that reaches a limit audits ``auth.lockout``.
    Success clears the account's counter, sets ``last_login_at`` and audits ``auth.login``.
    The caller commits in every case (failures must be counted).
    """
    now = now or datetime.now(UTC)
    attempted = email.strip().lower()[:320]
    lock = await login_throttle.check(session, attempted, address, now)
    if lock is not None:
        await audit.record(
            session,
            "auth.login_failed",
            "user",
            attempted,
            details={"reason": "locked", "scope": lock.scope},
        )
        return SignIn(lock=lock)
    user = (await session.execute(select(User).where(User.email == attempted))).scalar_one_or_none()
    # service accounts act only through API tokens: no password signs them in
    local = user if user is not None and user.kind != "service" else None
    matched = verify_password(local.password_hash if local else None, password)
    if user is not None and matched and user.is_active:
        await login_throttle.clear(session, attempted)
        await record_login(session, user, now, {"method": "password"})
        return SignIn(user=user)
    reason = (
        "unknown_user"
        if user is None
        else "service_account"
        if user.kind == "service"
        else "no_password"
        if user.password_hash is None
        else "inactive"
        if matched
        else "wrong_password"
    )
    await audit.record(session, "auth.login_failed", "user", attempted, details={"reason": reason})
    for started in await login_throttle.record_failure(session, attempted, address, now, policy):
        await audit.record(
            session,
            "auth.lockout",
            "user",
            attempted if started.scope == login_throttle.ACCOUNT else (address or ""),
            details={"scope": started.scope, "until": rfc3339(started.until)},
        )
    return SignIn()
