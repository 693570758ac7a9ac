"""Web session plumbing shared by the API and the pages: DB session, login guard, cookie."""

from __future__ import annotations

import random
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import TypeAlias

from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie, State
from litestar.di import NamedDependency, Provide
from litestar.enums import ScopeType
from litestar.exceptions import NotAuthorizedException
from litestar.handlers.base import BaseRouteHandler
from litestar.middleware import ASGIMiddleware
from litestar.middleware.csrf import CSRFMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from backend.observability import logs
from backend.runtime import Runtime
from backend.services import audit
from backend.services.identity import accounts, api_tokens, login_sessions, oidc, sso
from backend.services.identity.identity import Identity
from backend.services.identity.login_throttle import Lock, ThrottlePolicy
from backend.services.unit_of_work import UnitOfWork

SESSION_COOKIE = "railyard_session"

# Handler parameter types of the dependencies every controller provides under these names
# (``"db"``, ``"runtime"``, ``"user"``). Litestar injects a dependency into a parameter of
# the same name only when the parameter is marked with ``NamedDependency``; unmarked
# parameters would be read as query parameters from Litestar 3 on.
DbSession: TypeAlias = NamedDependency[UnitOfWork]
"""Parameter ``db``: the request's session in a transaction (:func:`provide_db`)."""
AppRuntime: TypeAlias = NamedDependency[Runtime]
"""Parameter ``runtime``: the process's :class:`Runtime` (:func:`provide_runtime`)."""
CurrentUser: TypeAlias = NamedDependency[Identity]
"""Parameter ``user``: the logged-in user (:func:`provide_user`, behind ``login_required``)."""


def runtime_of(state: State) -> Runtime:
    """The process's :class:`Runtime` stored on the app state."""
    runtime: Runtime = state.runtime
    return runtime


async def provide_db(state: State) -> AsyncGenerator[UnitOfWork, None]:
    """A session in a transaction, committed when the handler returns without error."""
    async with runtime_of(state).sessionmaker() as session, session.begin():
        yield session


def provide_runtime(state: State) -> Runtime:
    """Inject the runtime."""
    return runtime_of(state)


async def load_user(connection: ASGIConnection) -> Identity | None:
    """The user the request authenticates as (cached on the connection), or None.

    What authenticates is decided once, by :func:`token_authentication`: a request whose
    ``Authorization`` scheme is ``Bearer`` is authenticated by that token alone (a missing
    or malformed token is anonymous, never a fall back to the cookie); any other request by
    its session cookie. The CSRF middleware asks the same function, so a request skips the
    CSRF check exactly when no cookie can authenticate it.
    """
    if "user" in connection.scope.get("state", {}):
        user: Identity | None = connection.scope["state"]["user"]
        return user
    user = None
    by_token, bearer = token_authentication(connection.scope.get("headers", ()))
    if by_token:
        state = connection.scope.setdefault("state", {})
        state["auth"] = "token"
        if bearer is not None:
            runtime = runtime_of(connection.app.state)
            async with runtime.sessionmaker() as session, session.begin():
                found = await api_tokens.token_identity(session, bearer, datetime.now(UTC))
            if found is not None:
                user, scopes = found
                state["token_scopes"] = scopes
    elif token := session_token(connection):
        runtime = runtime_of(connection.app.state)
        async with runtime.sessionmaker() as session:
            user = await login_sessions.identity_for_session(session, token)
    connection.scope.setdefault("state", {})["user"] = user
    if user is not None:
        audit.bind_actor(user.id, user.email)
    return user


def session_token(connection: ASGIConnection) -> str | None:
    """The login session cookie's token when the request is authenticated by cookie; None
    for a bearer-token request (its cookies are ignored: log out and the account page act
    on the session that authenticates the request, never on a cookie sent alongside a
    token) and when there is no cookie."""
    if token_authentication(connection.scope.get("headers", ()))[0]:
        return None
    return connection.cookies.get(SESSION_COOKIE) or None


def client_address(connection: ASGIConnection) -> str | None:
    """The client's IP address as the server saw it (``None`` when unknown)."""
    return connection.client.host if connection.client else None


def user_agent(connection: ASGIConnection) -> str:
    """The ``User-Agent`` header (at most 400 characters)."""
    return connection.headers.get("user-agent", "")[:400]


async def password_sign_in(
    db: UnitOfWork, connection: ASGIConnection, email: str, password: str
) -> tuple[accounts.SignIn, str | None]:
    """Check a password sign-in (throttled, audited) and open a session when it succeeds;
    returns the outcome and the new session's cookie token (``None`` on failure). The
    caller answers and commits ``db`` in every case (failures are counted)."""
    runtime = runtime_of(connection.app.state)
    address = client_address(connection)
    outcome = await accounts.sign_in(
        db, email, password, address=address, policy=ThrottlePolicy.from_settings(runtime.settings)
    )
    if outcome.user is None:
        return outcome, None
    token = await login_sessions.open_session(
        db,
        outcome.user,
        runtime.settings.session_hours,
        address=address,
        user_agent=user_agent(connection),
        method="password",
    )
    return outcome, token


async def oidc_sign_in(
    db: UnitOfWork, connection: ASGIConnection, *, state: str, code: str
) -> tuple[str, str]:
    """Complete a single sign-on (:func:`backend.services.identity.oidc.finish`, then
    :func:`backend.services.identity.sso.user_for_claims`) and open a session; returns the cookie
    token and the path to go to. On :class:`~backend.services.identity.oidc.OidcError` it audits
    ``auth.login_failed`` and re-raises: the caller answers without raising, so the
    consumed state and the audit row are committed."""
    runtime = runtime_of(connection.app.state)
    settings = runtime.settings
    claims: dict[str, object] = {}
    try:
        claims, next_path = await oidc.finish(db, settings, state=state, code=code)
        user = await sso.user_for_claims(db, settings, claims)
    except oidc.OidcError as exc:
        attempted = str(claims.get("email") or f"oidc:{settings.oidc_issuer}")
        await audit.record(
            db,
            "auth.login_failed",
            "user",
            attempted[:200],
            details={"method": "oidc", "reason": str(exc)[:500]},
        )
        raise
    token = await login_sessions.open_session(
        db,
        user,
        settings.session_hours,
        address=client_address(connection),
        user_agent=user_agent(connection),
        method="oidc",
    )
    return token, next_path


def throttled_message(lock: Lock) -> tuple[str, int]:
    """The message and ``Retry-After`` seconds for a sign-in refused by ``lock``."""
    seconds = lock.retry_after(datetime.now(UTC))
    minutes = max(1, (seconds + 59) // 60)
    unit = "minute" if minutes == 1 else "minutes"
    return (f"Too many failed sign-in attempts. Try again in {minutes} {unit}.", seconds)


_AUTHORIZATION = b"authorization"
_CREDENTIALS_RE = re.compile(r"[ \t]*([^ \t]+)(?:[ \t]+(.*?))?[ \t]*", re.DOTALL)
_TOKEN68_RE = re.compile(r"[A-Za-z0-9._~+/-]+=*")


def token_authentication(headers: Iterable[tuple[bytes, bytes]]) -> tuple[bool, str | None]:
    """Whether a request authenticates by bearer token, and the token.

    ``headers`` are the ASGI scope's raw headers. A request authenticates by token when any
    ``Authorization`` header's scheme is ``Bearer`` (case-insensitive; the scheme is what
    comes before the first space or tab). The token is that header's credentials when they
    are one well-formed token68 (RFC 7235: letters, digits, ``-._~+/``, trailing ``=``) in
    the only ``Authorization`` header; otherwise it is None, and the request is anonymous:
    it never falls back to a cookie. Raises nothing.
    """
    by_token = False
    values = []
    for name, raw in headers:
        if name.lower() != _AUTHORIZATION:
            continue
        values.append(raw)
        match = _CREDENTIALS_RE.fullmatch(raw.decode("latin-1"))
        if match is not None and match[1].lower() == "bearer":
            by_token = True
    if not by_token or len(values) != 1:
        return by_token, None
    match = _CREDENTIALS_RE.fullmatch(values[0].decode("latin-1"))
    token = match[2] if match is not None else None
    return True, token if token and _TOKEN68_RE.fullmatch(token) else None


def bearer_token(connection: ASGIConnection) -> str | None:
    """The token of a well-formed ``Authorization: Bearer <token>`` header, if any (see
    :func:`token_authentication`)."""
    return token_authentication(connection.scope.get("headers", ()))[1]


REQUEST_ID_HEADER = "x-request-id"
_REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_REQUEST_ID_NAME = REQUEST_ID_HEADER.encode()


def new_request_id() -> str:
    """A random request id: 32 lowercase hex digits (128 bits).

    An id only has to be unique, not unguessable (it names a request in logs and the
    audit trail, and a client may choose its own), so it comes from the process's
    Mersenne Twister (the :mod:`random` module's, seeded from the OS and re-seeded in a
    forked child) instead of ``secrets``: that asks the kernel for bytes on every
    request, a system call that cost about 4 % of a webhook request's CPU in the API.
    """
    return f"{random.getrandbits(128):032x}"


class RequestContextMiddleware(ASGIMiddleware):
    """Give every HTTP request an id and bind it, with the client address, for the audit log.

    A well-formed incoming ``X-Request-ID`` (1-64 of ``A-Za-z0-9._:-``, as set by a proxy)
    is kept, otherwise a random 16-byte hex id is made (:func:`new_request_id`); either
    way it is echoed in the response's ``X-Request-ID`` header (see
    :mod:`backend.services.audit`).
    """

    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        """Bind the request context, then serve the request with the header added."""
        await with_request_context(scope, send, lambda sent: next_app(scope, receive, sent))


async def with_request_context(
    scope: Scope, send: Send, serve: Callable[[Send], Awaitable[None]]
) -> None:
    """Run ``serve(send)`` with the request's id and client address bound for the audit
    log and the logs, and the id added to the response start (see
    :class:`RequestContextMiddleware`)."""
    incoming = ""
    for name, value in scope.get("headers", []):
        if name == _REQUEST_ID_NAME:
            incoming = value.decode("latin-1")
            break
    request_id = incoming if _REQUEST_ID_RE.match(incoming) else new_request_id()
    client = scope.get("client")
    audit.bind_request(client[0] if client else None, request_id)
    logs.clear()
    logs.bind(request_id=request_id)
    encoded = request_id.encode()

    async def send_with_id(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            headers.append((_REQUEST_ID_NAME, encoded))
            message["headers"] = headers  # type: ignore[typeddict-unknown-key]
        await send(message)

    try:
        await serve(send_with_id)
    finally:
        audit.end_request()
        logs.clear()


class BearerAwareCSRFMiddleware(CSRFMiddleware):
    """CSRF protection that lets requests authenticated by a bearer token through.

    The decision is :func:`token_authentication`'s, the same one :func:`load_user` makes:
    a request skips the check only when it authenticates by its ``Bearer`` token, and then
    its cookies authenticate nothing (a missing or malformed token is anonymous). Browsers
    never add that header on their own, so such requests cannot be forged cross-site; a
    request that could be authenticated by its cookie is always checked.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and token_authentication(scope.get("headers", ()))[0]:
            await self.app(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


async def login_required(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """Guard: reject requests without a live login session (401)."""
    if await load_user(connection) is None:
        raise NotAuthorizedException("log in first")


async def provide_user(request: ASGIConnection) -> Identity:
    """The logged-in user (use behind :func:`login_required`)."""
    user = await load_user(request)
    if user is None:
        raise NotAuthorizedException("log in first")
    return user


def user_dependencies() -> dict[str, Provide]:
    """The ``db``, ``runtime`` and ``user`` providers of controllers behind ``login_required``.

    Handlers take them as ``db: DbSession``, ``runtime: AppRuntime``, ``user: CurrentUser``.
    """
    return {
        "db": Provide(provide_db),
        "runtime": Provide(provide_runtime, sync_to_thread=False),
        "user": Provide(provide_user),
    }


def session_cookie(runtime: Runtime, token: str) -> Cookie:
    """The login cookie: HttpOnly, SameSite=Lax, Secure when configured, session lifetime."""
    return Cookie(
        key=SESSION_COOKIE,
        value=token,
        httponly=True,
        samesite="lax",
        secure=runtime.settings.secure_cookies,
        max_age=int(runtime.settings.session_hours * 3600),
        path="/",
    )
