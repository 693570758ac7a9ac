"""Admin pages for accounts and sessions: ``/admin/users`` (create or invite, change role,
deactivate, reactivate, reset password, sign out everywhere) and ``/admin/sessions``
(every live session; revoke). ``users:manage`` (admins). Forms post to a route each; the
page is rendered again with what happened (and, for an invitation or a reset, the
one-time link, shown only there), or with the error (400/404/409). Rendered through
``backend.services`` only.
"""

from __future__ import annotations

import uuid
from typing import Any

from litestar import Request, Response, get, post
from litestar.di import Provide
from litestar.params import FromPath, URLEncodedBody
from litestar.response import Redirect

from backend.auth.policy import Permission
from backend.services.identity import accounts, login_sessions, password_links
from backend.services.identity.passwords import MIN_LENGTH, WeakPassword
from backend.web.authentication import AppRuntime, CurrentUser, DbSession, provide_user
from frontend.rendering import LoginRequiredPages, render

USERS = {"permission": Permission.USERS_MANAGE}


class AdminUserPages(LoginRequiredPages):
    """Users and sessions (admins)."""

    dependencies = {**LoginRequiredPages.dependencies, "user": Provide(provide_user)}

    async def _users(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        *,
        status_code: int = 200,
        error: str | None = None,
        notice: str | None = None,
        link: password_links.IssuedLink | None = None,
        form: dict[str, str] | None = None,
    ) -> Response[str]:
        return render(
            request,
            "admin_users.html",
            status_code=status_code,
            rows=await accounts.list_users(db),
            roles=accounts.ROLES,
            error=error,
            notice=notice,
            link=link,
            form=form or {},
            min_length=MIN_LENGTH,
        )

    @get("/admin/users", operation_id="page_admin_users", opt=USERS)
    async def users_page(self, request: Request[Any, Any, Any], db: DbSession) -> Response[str]:
        """Every account with its role, state, sessions and actions."""
        return await self._users(request, db)

    @post("/admin/users", operation_id="page_create_user", opt=USERS)
    async def create_user(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        runtime: AppRuntime,
        user: CurrentUser,
        data: URLEncodedBody[dict[str, str]],
    ) -> Response[str]:
        """Create an account with a password, or (password left empty) invite it: the
        page then shows the one-time invitation link."""
        password = data.get("password") or None
        try:
            created = await accounts.create_user(
                db,
                data.get("email", ""),
                password,
                role=data.get("role", "viewer"),
                name=data.get("display_name", ""),
            )
            link = None
            if password is None:
                link = await password_links.issue_link(
                    db, runtime.settings, created.id, purpose="invite", created_by=user.id
                )
        except (accounts.AccountError, WeakPassword) as exc:
            message = f"Password: {exc}" if isinstance(exc, WeakPassword) else str(exc)
            status = exc.status if isinstance(exc, accounts.AccountError) else 400
            form = {k: v for k, v in data.items() if k in ("email", "display_name", "role")}
            return await self._users(
                request, db, status_code=status, error=message.capitalize(), form=form
            )
        notice = f"Created {created.email} ({created.role})."
        return await self._users(request, db, status_code=201, notice=notice, link=link)

    async def _act(
        self, request: Request[Any, Any, Any], db: DbSession, action: Any
    ) -> Response[Any]:
        try:
            await action
        except accounts.AccountError as exc:
            return await self._users(request, db, status_code=exc.status, error=str(exc))
        return Redirect("/admin/users")

    @post("/admin/users/{user_id:uuid}/role", operation_id="page_user_role", opt=USERS)
    async def change_role(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        user_id: FromPath[uuid.UUID],
        data: URLEncodedBody[dict[str, str]],
    ) -> Response[Any]:
        """Change a user's role."""
        return await self._act(request, db, accounts.set_role(db, user_id, data.get("role", "")))

    @post("/admin/users/{user_id:uuid}/deactivate", operation_id="page_user_deactivate", opt=USERS)
    async def deactivate(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        user: CurrentUser,
        user_id: FromPath[uuid.UUID],
    ) -> Response[Any]:
        """Deactivate an account (its sessions end; tokens and SSO stop working)."""
        change = accounts.set_active(db, user_id, False, actor_id=user.id)
        return await self._act(request, db, change)

    @post("/admin/users/{user_id:uuid}/reactivate", operation_id="page_user_reactivate", opt=USERS)
    async def reactivate(
        self, request: Request[Any, Any, Any], db: DbSession, user_id: FromPath[uuid.UUID]
    ) -> Response[Any]:
        """Reactivate an account."""
        return await self._act(request, db, accounts.set_active(db, user_id, True))

    @post(
        "/admin/users/{user_id:uuid}/sign-out-everywhere",
        operation_id="page_user_sign_out_everywhere",
        opt=USERS,
    )
    async def sign_out_everywhere(
        self, request: Request[Any, Any, Any], db: DbSession, user_id: FromPath[uuid.UUID]
    ) -> Response[Any]:
        """End every session of a user."""
        return await self._act(request, db, _sign_out(db, user_id))

    @post(
        "/admin/users/{user_id:uuid}/reset-password",
        operation_id="page_user_reset_password",
        opt=USERS,
    )
    async def reset_password(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        runtime: AppRuntime,
        user: CurrentUser,
        user_id: FromPath[uuid.UUID],
    ) -> Response[Any]:
        """Reset a password: the page shows the one-time link to hand to the user."""
        try:
            target = await accounts.user_row(db, user_id)
            link = await password_links.issue_link(
                db, runtime.settings, user_id, purpose="reset", created_by=user.id
            )
        except accounts.AccountError as exc:
            return await self._users(request, db, status_code=exc.status, error=str(exc))
        notice = (
            f"The password of {target.user.email} was reset and their sessions ended."
            " Give them this link to choose a new one."
        )
        return await self._users(request, db, notice=notice, link=link)

    @get("/admin/sessions", operation_id="page_admin_sessions", opt=USERS)
    async def sessions_page(self, request: Request[Any, Any, Any], db: DbSession) -> Response[str]:
        """Every live session: user, address, browser, signed in, last seen."""
        return render(
            request, "admin_sessions.html", sessions=await login_sessions.list_sessions(db)
        )

    @post("/admin/sessions/{session_id:uuid}/revoke", operation_id="page_revoke_session", opt=USERS)
    async def revoke_session(self, db: DbSession, session_id: FromPath[uuid.UUID]) -> Redirect:
        """End one session (an unknown or ended one changes nothing)."""
        await login_sessions.revoke(db, session_id)
        return Redirect("/admin/sessions")


async def _sign_out(db: DbSession, user_id: uuid.UUID) -> int:
    await accounts.user_row(db, user_id)  # AccountError (404) for an unknown user
    return await login_sessions.sign_out_everywhere(db, user_id)
