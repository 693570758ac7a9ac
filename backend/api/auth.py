"""Sign-in, sign-out and the caller's own sessions for the JSON API (the pages use the
same session cookie)."""

from __future__ import annotations

import uuid
from typing import Any

from litestar import Controller, Request, Response, delete, get, post
from litestar.di import Provide
from litestar.exceptions import NotFoundException
from litestar.params import FromPath, JSONBody

from backend.api.errors import problem_response
from backend.api.list_schemas import SessionList, newest_first
from backend.api.lists import DEFAULT_LIMIT, Cursor, Limit
from backend.api.schemas import LoginIn, SessionsEnded, UserOut
from backend.api.user_schemas import session_out
from backend.auth.policy import Permission
from backend.runtime import Runtime
from backend.services.identity import login_sessions
from backend.services.identity.identity import Account
from backend.web.authentication import (
    SESSION_COOKIE,
    CurrentUser,
    DbSession,
    password_sign_in,
    provide_db,
    provide_user,
    session_cookie,
    session_token,
    throttled_message,
)


def user_out(user: Account) -> UserOut:
    """Wire form of a user."""
    return UserOut(str(user.id), user.email, user.display_name, user.role)


def _error(
    request: Request[Any, Any, Any],
    status: int,
    detail: str,
    headers: dict[str, str] | None = None,
) -> Response[Any]:
    response = problem_response(request, status, detail)
    response.headers.update(headers or {})
    return response


class AuthController(Controller):
    """``/api/auth``: session login for API clients and the designer, own sessions."""

    path = "/api/v1/auth"
    tags = ["auth"]
    dependencies = {"db": Provide(provide_db)}

    @post("/login", operation_id="login", opt={"permission": Permission.PUBLIC})
    async def login(
        self, data: JSONBody[LoginIn], db: DbSession, request: Request
    ) -> Response[UserOut]:
        """Check credentials and set the session cookie.

        401 with the same message for an unknown email, a wrong password and a deactivated
        account; 429 with ``Retry-After`` (seconds) while the account or the client
        address is locked after too many failures.
        """
        outcome, token = await password_sign_in(db, request, data.email, data.password)
        if outcome.lock is not None:
            message, seconds = throttled_message(outcome.lock)
            return _error(request, 429, message, {"Retry-After": str(seconds)})
        if outcome.user is None or token is None:
            return _error(request, 401, "wrong email or password")
        runtime: Runtime = request.app.state.runtime
        response = Response(user_out(outcome.user), status_code=200)
        response.set_cookie(session_cookie(runtime, token))
        return response

    @post(
        "/logout",
        operation_id="logout",
        opt={"permission": Permission.SESSIONS_OWN},
        status_code=204,
    )
    async def logout(self, db: DbSession, request: Request) -> Response[None]:
        """End the session."""
        token = session_token(request)
        response = Response(None, status_code=204)
        if token:  # a token request has no session to end (its cookies are not its own)
            await login_sessions.close(db, token)
            response.delete_cookie(SESSION_COOKIE)
        return response

    @get(
        "/me",
        operation_id="me",
        opt={"permission": Permission.AUTHENTICATED},
        dependencies={"user": Provide(provide_user)},
    )
    async def me(self, user: CurrentUser) -> UserOut:
        """The logged-in user."""
        return user_out(user)

    @get(
        "/sessions",
        operation_id="list_own_sessions",
        opt={"permission": Permission.AUTHENTICATED},
        dependencies={"user": Provide(provide_user)},
    )
    async def own_sessions(
        self,
        request: Request[Any, Any, Any],
        user: CurrentUser,
        db: DbSession,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> SessionList:
        """The caller's live sessions, newest first (by start, then id)."""
        found = [session_out(r) for r in await login_sessions.list_sessions(db, user.id)]
        return newest_first(request, SessionList, found, cursor=cursor, limit=limit)

    @delete(
        "/sessions/{session_id:uuid}",
        operation_id="revoke_own_session",
        opt={"permission": Permission.SESSIONS_OWN},
        dependencies={"user": Provide(provide_user)},
        status_code=204,
    )
    async def revoke_own(
        self, session_id: FromPath[uuid.UUID], user: CurrentUser, db: DbSession
    ) -> None:
        """End one of the caller's sessions; 404 when it is not one of them."""
        if not await login_sessions.revoke(db, session_id, user_id=user.id):
            raise NotFoundException("no such session")

    @post(
        "/sign-out-everywhere",
        operation_id="sign_out_everywhere",
        opt={"permission": Permission.SESSIONS_OWN},
        dependencies={"user": Provide(provide_user)},
        status_code=200,
    )
    async def sign_out_everywhere(
        self, user: CurrentUser, db: DbSession
    ) -> Response[SessionsEnded]:
        """End every session of the caller, this one included; answers
        ``{"sessions_ended": n}`` and clears the cookie."""
        ended = await login_sessions.sign_out_everywhere(db, user.id)
        response = Response(SessionsEnded(ended), status_code=200)
        response.delete_cookie(SESSION_COOKIE)
        return response
