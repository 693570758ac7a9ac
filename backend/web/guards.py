"""The one Litestar guard: ``authorize`` enforces the permission every route declares.

A route declares ``opt={"permission": Permission.X}``. The guard (installed on the app, so
it runs for every route) answers:

- no declared permission: 403 (fail closed; the authorization matrix test names the route),
- ``PUBLIC``: allowed without login,
- anonymous: 401 (pages turn it into a redirect to the login page),
- object permissions: the workflow, run, file or credential named by the path parameter
  (``workflow_id``, ``run_id``, ``file_id``, ``credential_id``) is looked up; an unknown
  object, or one the caller cannot even read, is 404; readable but not allowed is 403;
  a page the browser navigates to (``GET`` of a route whose ``opt`` sets
  :data:`EXPLAIN_REFUSAL`) names an existing object the caller cannot read with a 403 that
  says why (no grant, ask the owner or an admin) instead of the 404 the API answers,
- system permissions: the role (and API token scope) decides, 403 otherwise; a route
  needing ``metrics:read`` also lets in ``Authorization: Bearer <RAILYARD_METRICS_TOKEN>``
  when that setting is set (a Prometheus scraper holds no user account).

The caller's :class:`~backend.auth.policy.Principal` is cached on the request scope
(:func:`principal_of`) for list filtering and for pages hiding buttons.
"""

from __future__ import annotations

import hmac
from typing import Any, TypeAlias

from litestar.connection import ASGIConnection
from litestar.di import NamedDependency, Provide
from litestar.exceptions import NotAuthorizedException, NotFoundException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler

from backend.auth.policy import (
    OBJECT_PERMISSIONS,
    Decision,
    ObjectAccess,
    Permission,
    Principal,
    decide,
)
from backend.services.identity import access
from backend.services.unit_of_work import UnitOfWork
from backend.web.authentication import bearer_token, load_user, runtime_of, user_dependencies

PRINCIPAL_KEY = "principal"
EXPLAIN_REFUSAL = "explain_refusal"
"""``opt`` key of page routes: an existing object the caller cannot read is a 403 saying so
(a person opening a shared link learns to ask for access), not the API's 404."""

NO_ACCESS: dict[Permission, str] = {
    Permission.RUN_READ: "this run's workflow",
    Permission.RUN_CONTROL: "this run's workflow",
    Permission.FILE_READ: "the workflow that received this file",
    Permission.CREDENTIAL_USE: "this credential",
    Permission.CREDENTIAL_MANAGE: "this credential",
}


def declared_permission(handler: BaseRouteHandler) -> Permission | None:
    """The permission a route handler declares in its ``opt``, or None."""
    value = handler.opt.get("permission")
    return value if isinstance(value, Permission) else None


async def principal_of(
    connection: ASGIConnection[Any, Any, Any, Any], session: UnitOfWork | None = None
) -> Principal | None:
    """The request's principal (None when anonymous), computed once per request (in
    ``session`` when given, else in a session of its own)."""
    state = connection.scope.setdefault("state", {})
    if PRINCIPAL_KEY in state:
        cached: Principal | None = state[PRINCIPAL_KEY]
        return cached
    user = await load_user(connection)
    principal = None
    if user is not None and session is not None:
        principal = await access.principal_for(session, user, state.get("token_scopes"))
    elif user is not None:
        async with runtime_of(connection.app.state).sessionmaker() as own:
            principal = await access.principal_for(own, user, state.get("token_scopes"))
    state[PRINCIPAL_KEY] = principal
    return principal


async def _object(
    session: UnitOfWork, permission: Permission, params: dict[str, Any]
) -> ObjectAccess | None:
    """The facts of the object a permission is about, from the path parameters."""
    if permission in (Permission.CREDENTIAL_USE, Permission.CREDENTIAL_MANAGE):
        return await access.credential_access(session, params.get("credential_id"))
    if permission in (Permission.RUN_READ, Permission.RUN_CONTROL):
        workflow_id = await access.run_workflow_id(session, params.get("run_id"))
    elif permission is Permission.FILE_READ:
        workflow_id = await access.file_workflow_id(session, params.get("file_id"))
    else:
        workflow_id = params.get("workflow_id")
    return await access.workflow_access(session, workflow_id) if workflow_id else None


async def authorize(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    """Guard: allow the request only when the policy allows the route's permission.

    Litestar's generated ``OPTIONS`` handlers (the only ones the app has) are public: they
    answer 204 with the path's ``Allow`` methods and no data.
    """
    if getattr(handler, "http_methods", None) == {"OPTIONS"}:
        return
    permission = declared_permission(handler)
    if permission is None:
        raise PermissionDeniedException("this route declares no permission")
    if permission is Permission.PUBLIC:
        return
    if permission is Permission.METRICS_READ and _metrics_token_matches(connection):
        return
    async with runtime_of(connection.app.state).sessionmaker() as session:
        principal = await principal_of(connection, session)
        obj = None
        if principal is not None and permission in OBJECT_PERMISSIONS:
            obj = await _object(session, permission, dict(connection.path_params))
    decision = decide(principal, permission, obj)
    if decision is Decision.ALLOW:
        return
    if decision is Decision.LOGIN:
        raise NotAuthorizedException("log in first")
    if decision is Decision.HIDE:
        if obj is not None and _explains_refusal(connection, handler):
            what = NO_ACCESS.get(permission, "this workflow")
            raise PermissionDeniedException(
                f"You have no access to {what}: neither you nor your groups hold a grant "
                "on it. Ask its owner or an admin to share it with you."
            )
        raise NotFoundException("not found")
    raise PermissionDeniedException(f"you do not have the {permission.value} permission here")


def _explains_refusal(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> bool:
    """True for a page navigation (``GET``/``HEAD`` of a route opting in), where a person
    is better served by the reason than by a 404."""
    return bool(handler.opt.get(EXPLAIN_REFUSAL)) and connection.scope.get("method") in (
        "GET",
        "HEAD",
    )


def _metrics_token_matches(connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
    """True when the request's bearer token is the configured metrics token."""
    expected = runtime_of(connection.app.state).settings.metrics_token
    given = bearer_token(connection)
    return bool(expected and given) and hmac.compare_digest(str(given).encode(), expected.encode())


def permission_opt(permission: Permission) -> dict[str, Any]:
    """``opt`` of a route needing ``permission`` (``@get(..., opt=permission_opt(P))``)."""
    return {"permission": permission}


async def provide_principal(request: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    """The caller's principal (use behind :func:`authorize` on a non-public route)."""
    principal = await principal_of(request)
    if principal is None:
        raise NotAuthorizedException("log in first")
    return principal


CurrentPrincipal: TypeAlias = NamedDependency[Principal]
"""Parameter ``principal``: the caller's :class:`Principal` (:func:`provide_principal`)."""


def access_dependencies() -> dict[str, Provide]:
    """``db``, ``runtime``, ``user`` and ``principal`` providers for controllers."""
    return {**user_dependencies(), "principal": Provide(provide_principal)}
