"""Identity pages: single sign-on (``/login/oidc``), password links
(``/reset-password/<token>``) and the signed-in user's own account (``/account``: sessions,
sign out everywhere). Admin pages for users and sessions are in
:mod:`frontend.admin_pages`.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from litestar import Controller, Request, Response, get, post
from litestar.di import Provide
from litestar.params import FromPath, FromQuery, QueryParameter, URLEncodedBody
from litestar.response import Redirect

from backend.auth.policy import Permission
from backend.services.identity import login_sessions, oidc, password_links, sso
from backend.services.identity.passwords import MIN_LENGTH, WeakPassword
from backend.web.authentication import (
    SESSION_COOKIE,
    AppRuntime,
    CurrentUser,
    DbSession,
    load_user,
    oidc_sign_in,
    provide_db,
    provide_runtime,
    provide_user,
    session_cookie,
    session_token,
)
from backend.web.guards import permission_opt
from frontend.rendering import LoginRequiredPages, login_page, render, safe_next

PUBLIC = permission_opt(Permission.PUBLIC)
AUTHENTICATED = permission_opt(Permission.AUTHENTICATED)
SESSIONS_OWN = permission_opt(Permission.SESSIONS_OWN)


class SsoPages(Controller):
    """Public identity pages: single sign-on and password links (no login needed)."""

    path = "/"
    include_in_schema = False
    dependencies = {
        "db": Provide(provide_db),
        "runtime": Provide(provide_runtime, sync_to_thread=False),
    }

    @get("/login/oidc", operation_id="page_oidc_start", opt=PUBLIC)
    async def oidc_start(
        self,
        request: Request,
        db: DbSession,
        runtime: AppRuntime,
        next: FromQuery[str | None] = None,
    ) -> Response[Any]:
        """Send the browser to the identity provider (authorization code + PKCE)."""
        target = safe_next(next)
        try:
            sso.check_settings(runtime.settings)
            url = await oidc.start(db, runtime.settings, next_path=target)
        except oidc.OidcError as exc:
            return login_page(
                request,
                runtime,
                next=target,
                error=f"Single sign-on: {exc}",
                status_code=exc.status,
            )
        return Redirect(url)

    @get("/login/oidc/callback", operation_id="page_oidc_callback", opt=PUBLIC)
    async def oidc_callback(
        self,
        request: Request,
        db: DbSession,
        runtime: AppRuntime,
        oauth_state: Annotated[str, QueryParameter(name="state")] = "",
        code: FromQuery[str] = "",
        error: FromQuery[str] = "",
        error_description: FromQuery[str] = "",
    ) -> Response[Any]:
        """The provider's redirect back: sign in and go on, or show why not."""
        if error or not code or not oauth_state:
            reason = error_description or error or "the provider sent no authorization code"
            return login_page(
                request,
                runtime,
                next="/workflows",
                error=f"Single sign-on was not completed: {reason}",
                status_code=400,
            )
        try:
            token, target = await oidc_sign_in(db, request, state=oauth_state, code=code)
        except oidc.OidcError as exc:
            return login_page(
                request,
                runtime,
                next="/workflows",
                error=f"Single sign-on failed: {exc}",
                status_code=exc.status,
            )
        response: Response[Any] = Redirect(safe_next(target))
        response.set_cookie(session_cookie(runtime, token))
        return response

    @get("/reset-password/{token:str}", operation_id="page_password_link", opt=PUBLIC)
    async def link_form(
        self, request: Request, db: DbSession, token: FromPath[str]
    ) -> Response[str]:
        """The form to choose a password through a reset or invitation link."""
        await load_user(request)
        try:
            user = await password_links.user_for_link(db, token)
        except password_links.InvalidLink as exc:
            return render(request, "password_link.html", status_code=410, invalid=str(exc))
        return render(
            request, "password_link.html", email=user.email, token=token, min_length=MIN_LENGTH
        )

    @post("/reset-password/{token:str}", operation_id="page_password_link_submit", opt=PUBLIC)
    async def link_submit(
        self,
        request: Request,
        db: DbSession,
        runtime: AppRuntime,
        token: FromPath[str],
        data: URLEncodedBody[dict[str, str]],
    ) -> Response[str]:
        """Set the password (policy checked; both fields must match), then ask to sign in."""
        await load_user(request)
        password = data.get("password", "")
        try:
            user = await password_links.user_for_link(db, token)
            if password != data.get("confirm", ""):
                raise WeakPassword("the two passwords differ")
            await password_links.redeem(db, token, password)
        except password_links.InvalidLink as exc:
            return render(request, "password_link.html", status_code=410, invalid=str(exc))
        except WeakPassword as exc:
            return render(
                request,
                "password_link.html",
                status_code=400,
                email=user.email,
                token=token,
                min_length=MIN_LENGTH,
                error=f"Password: {exc}.",
            )
        return login_page(
            request,
            runtime,
            next="/workflows",
            notice="Your password is set. Sign in with it now.",
        )


class AccountPages(LoginRequiredPages):
    """``/account``: the signed-in user's sessions and "Sign out everywhere"."""

    dependencies = {**LoginRequiredPages.dependencies, "user": Provide(provide_user)}

    @get("/account", operation_id="page_account", opt=AUTHENTICATED)
    async def account(self, request: Request, db: DbSession, user: CurrentUser) -> Response[str]:
        """The user's account: profile facts and live sessions."""
        current = session_token(request) or ""
        sessions = await login_sessions.list_sessions(db, user.id)
        this_id = await login_sessions.session_id_of(db, current) if current else None
        return render(request, "account.html", sessions=sessions, this_session=this_id)

    @post(
        "/account/sessions/{session_id:uuid}/revoke",
        operation_id="page_account_revoke",
        opt=SESSIONS_OWN,
    )
    async def revoke(
        self, db: DbSession, user: CurrentUser, session_id: FromPath[uuid.UUID]
    ) -> Redirect:
        """End one of the user's own sessions."""
        await login_sessions.revoke(db, session_id, user_id=user.id)
        return Redirect("/account")

    @post(
        "/account/sign-out-everywhere",
        operation_id="page_account_sign_out_everywhere",
        opt=SESSIONS_OWN,
    )
    async def sign_out_everywhere(self, db: DbSession, user: CurrentUser) -> Response[Any]:
        """End every session of the user, this one too, and go to the login page."""
        await login_sessions.sign_out_everywhere(db, user.id)
        response: Response[Any] = Redirect("/login")
        response.delete_cookie(SESSION_COOKIE)
        return response
