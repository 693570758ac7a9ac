"""Wire types of the user and session administration API (``/api/admin/users``,
``/api/admin/sessions``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from backend.api.schemas import Email, Name, RoleName, SessionOut
from backend.services.identity import login_sessions
from backend.services.identity.accounts import UserRow


class AdminUserOut(msgspec.Struct):
    """An account as admins see it: ``kind`` is ``human`` or ``service``; ``sso`` whether
    it is linked to the identity provider; ``has_password`` whether a local password is
    set; ``sessions`` how many live sessions it has; ``external_groups`` the provider's
    groups at the last single sign-on. Times are ISO 8601 UTC (``None``: never)."""

    id: str
    email: str
    display_name: str
    role: str
    active: bool
    kind: str
    sso: bool
    has_password: bool
    sessions: int
    external_groups: list[str]
    created_at: datetime
    last_login_at: datetime | None


class UserCreateIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST /api/admin/users: without ``password`` the account gets an invitation
    link (shown once in the answer) to choose one; with it, the password must meet the
    policy."""

    email: Email
    role: RoleName = "viewer"
    display_name: str = ""
    password: Annotated[str, msgspec.Meta(min_length=12, max_length=256)] | None = None


class UserPatchIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of PATCH /api/admin/users/{id}: the fields to change."""

    role: RoleName | msgspec.UnsetType = msgspec.UNSET
    display_name: Name | msgspec.UnsetType = msgspec.UNSET


class PasswordLinkOut(msgspec.Struct):
    """A one-time link to choose a password (reset or invitation); shown only once."""

    url: str
    expires_at: datetime
    purpose: str


class UserCreatedOut(msgspec.Struct):
    """Answer of POST /api/admin/users: the account and, without a password, its
    invitation link."""

    user: AdminUserOut
    invitation: PasswordLinkOut | None = None


class SessionsEndedOut(msgspec.Struct):
    """How many sessions a "sign out everywhere" ended."""

    sessions_ended: int


def admin_user_out(row: UserRow) -> AdminUserOut:
    """Wire form of a :class:`~backend.services.identity.accounts.UserRow`."""
    user = row.user
    return AdminUserOut(
        id=str(user.id),
        email=user.email,
        display_name=user.display_name,
        role=user.role,
        active=user.is_active,
        kind=user.kind,
        sso=row.sso,
        has_password=user.password_hash is not None,
        sessions=row.sessions,
        external_groups=[g for g in (user.external_groups or []) if isinstance(g, str)],
        created_at=user.created_at,
        last_login_at=user.last_login_at,
    )


def session_out(row: login_sessions.SessionRow) -> SessionOut:
    """Wire form of a login session."""
    return SessionOut(
        id=str(row.id),
        user_id=str(row.user_id),
        email=row.email,
        address=row.address,
        user_agent=row.user_agent,
        method=row.method,
        created_at=row.created_at,
        last_seen_at=row.last_seen_at,
        expires_at=row.expires_at,
    )
