"""``/api/admin/users`` (accounts: list, create or invite, change role or name,
deactivate, reactivate, reset password, sign out everywhere) and ``/api/admin/sessions``
(every live session: list, revoke). Both need ``users:manage`` (admins).

Errors: 400 with ``field`` for bad input (email, role, password policy), 404 for an
unknown user or session, 409 for the last active admin or one's own deactivation.
"""

from __future__ import annotations

import uuid
from typing import Any

from litestar import Controller, Request, delete, get, patch, post
from litestar.exceptions import NotFoundException
from litestar.params import FromPath, FromQuery, JSONBody

from backend.api.list_schemas import SessionList, UserList, newest_first
from backend.api.lists import DEFAULT_LIMIT, Cursor, Limit, listed
from backend.api.user_schemas import (
    AdminUserOut,
    PasswordLinkOut,
    SessionsEndedOut,
    UserCreatedOut,
    UserCreateIn,
    UserPatchIn,
    admin_user_out,
    session_out,
)
from backend.auth.policy import Permission
from backend.services.identity import accounts, login_sessions, password_links
from backend.web.authentication import AppRuntime, CurrentUser, DbSession
from backend.web.guards import access_dependencies

USERS = {"permission": Permission.USERS_MANAGE}


async def _link(
    db: DbSession, runtime: AppRuntime, user_id: uuid.UUID, actor: uuid.UUID, purpose: str
) -> PasswordLinkOut:
    link = await password_links.issue_link(
        db, runtime.settings, user_id, purpose=purpose, created_by=actor
    )
    return PasswordLinkOut(link.url, link.expires_at, link.purpose)


class UserAdminController(Controller):
    """Accounts, for admins."""

    path = "/api/v1/admin/users"
    tags = ["admin"]
    dependencies = access_dependencies()

    @get("/", operation_id="list_users", opt=USERS)
    async def list_users(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> UserList:
        """Every account, by email (then id)."""
        found = [admin_user_out(row) for row in await accounts.list_users(db)]
        return listed(
            request,
            UserList,
            found,
            lambda u: (u.email, u.id),
            tuple[str, str],
            cursor=cursor,
            limit=limit,
        )

    @post("/", operation_id="create_user", opt=USERS, status_code=201)
    async def create(
        self, data: JSONBody[UserCreateIn], db: DbSession, runtime: AppRuntime, user: CurrentUser
    ) -> UserCreatedOut:
        """Create an account; without a password the answer carries a one-time invitation
        link (valid ``RAILYARD_PASSWORD_LINK_HOURS``) to hand to the person."""
        created = await accounts.create_user(
            db, data.email, data.password, role=data.role, name=data.display_name
        )
        invitation = None
        if data.password is None:
            invitation = await _link(db, runtime, created.id, user.id, "invite")
        row = await accounts.user_row(db, created.id)
        return UserCreatedOut(user=admin_user_out(row), invitation=invitation)

    @get("/{user_id:uuid}", operation_id="get_user", opt=USERS)
    async def get_one(self, db: DbSession, user_id: FromPath[uuid.UUID]) -> AdminUserOut:
        """One account."""
        return admin_user_out(await accounts.user_row(db, user_id))

    @patch("/{user_id:uuid}", operation_id="update_user", opt=USERS)
    async def update(
        self, data: JSONBody[UserPatchIn], db: DbSession, user_id: FromPath[uuid.UUID]
    ) -> AdminUserOut:
        """Change the role (audited ``user.role_change``) and/or the display name."""
        if isinstance(data.display_name, str):
            await accounts.update_profile(db, user_id, display_name=data.display_name)
        if isinstance(data.role, str):
            await accounts.set_role(db, user_id, data.role)
        return admin_user_out(await accounts.user_row(db, user_id))

    @post("/{user_id:uuid}/deactivate", operation_id="deactivate_user", opt=USERS, status_code=200)
    async def deactivate(
        self, db: DbSession, user: CurrentUser, user_id: FromPath[uuid.UUID]
    ) -> AdminUserOut:
        """Deactivate: sessions end; sessions, API tokens and SSO stop working."""
        await accounts.set_active(db, user_id, False, actor_id=user.id)
        return admin_user_out(await accounts.user_row(db, user_id))

    @post("/{user_id:uuid}/reactivate", operation_id="reactivate_user", opt=USERS, status_code=200)
    async def reactivate(self, db: DbSession, user_id: FromPath[uuid.UUID]) -> AdminUserOut:
        """Reactivate a deactivated account."""
        await accounts.set_active(db, user_id, True)
        return admin_user_out(await accounts.user_row(db, user_id))

    @post(
        "/{user_id:uuid}/password-reset",
        operation_id="reset_user_password",
        opt=USERS,
        status_code=200,
    )
    async def reset_password(
        self, db: DbSession, runtime: AppRuntime, user: CurrentUser, user_id: FromPath[uuid.UUID]
    ) -> PasswordLinkOut:
        """Reset the password: the old one stops working, sessions end, and the answer
        carries a one-time link (shown once) for the user to choose a new one."""
        return await _link(db, runtime, user_id, user.id, "reset")

    @post(
        "/{user_id:uuid}/sign-out-everywhere",
        operation_id="sign_out_user_everywhere",
        opt=USERS,
        status_code=200,
    )
    async def sign_out_everywhere(
        self, db: DbSession, user_id: FromPath[uuid.UUID]
    ) -> SessionsEndedOut:
        """End every session of the user."""
        await accounts.user_row(db, user_id)  # 404 for an unknown user
        return SessionsEndedOut(await login_sessions.sign_out_everywhere(db, user_id))


class SessionAdminController(Controller):
    """Every live login session, for admins."""

    path = "/api/v1/admin/sessions"
    tags = ["admin"]
    dependencies = access_dependencies()

    @get("/", operation_id="list_sessions", opt=USERS)
    async def list_sessions(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        user_id: FromQuery[uuid.UUID | None] = None,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> SessionList:
        """Live sessions (of ``?user_id=`` when given), newest first (by start, then id)."""
        found = [session_out(r) for r in await login_sessions.list_sessions(db, user_id)]
        return newest_first(request, SessionList, found, cursor=cursor, limit=limit)

    @delete("/{session_id:uuid}", operation_id="revoke_session", opt=USERS)
    async def revoke(self, db: DbSession, session_id: FromPath[uuid.UUID]) -> None:
        """End one session (204; 404 when unknown)."""
        if not await login_sessions.revoke(db, session_id):
            raise NotFoundException("no such session")
