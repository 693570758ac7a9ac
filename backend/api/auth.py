"""Login and logout for the JSON API (the pages use the same session cookie)."""

from __future__ import annotations

from litestar import Controller, Request, Response, get, post
from litestar.di import Provide
from litestar.exceptions import NotAuthorizedException
from litestar.params import JSONBody

from backend.api.schemas import LoginIn, UserOut
from backend.auth.policy import Permission
from backend.auth.web import (
    SESSION_COOKIE,
    CurrentUser,
    DbSession,
    provide_db,
    provide_user,
    session_cookie,
)
from backend.db.models import User
from backend.runtime import Runtime
from backend.services import accounts


def user_out(user: User) -> UserOut:
    """Wire form of a user."""
    return UserOut(str(user.id), user.email, user.display_name, user.role)


class AuthController(Controller):
    """``/api/auth``: session login for API clients and the designer."""

    path = "/api/auth"
    tags = ["auth"]
    dependencies = {"db": Provide(provide_db)}

    @post("/login", operation_id="login", opt={"permission": Permission.PUBLIC})
    async def login(
        self, data: JSONBody[LoginIn], db: DbSession, request: Request
    ) -> Response[UserOut]:
        """Check credentials and set the session cookie; 401 on bad credentials."""
        user = await accounts.authenticate(db, data.email, data.password)
        if user is None:
            raise NotAuthorizedException("wrong email or password")
        runtime: Runtime = request.app.state.runtime
        token = await accounts.open_session(db, user, runtime.settings.session_hours)
        response = Response(user_out(user), status_code=200)
        response.set_cookie(session_cookie(runtime, token))
        return response

    @post(
        "/logout",
        operation_id="logout",
        opt={"permission": Permission.AUTHENTICATED},
        status_code=204,
    )
    async def logout(self, db: DbSession, request: Request) -> Response[None]:
        """End the session."""
        token = request.cookies.get(SESSION_COOKIE)
        if token:
            await accounts.close_session(db, token)
        response = Response(None, status_code=204)
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
