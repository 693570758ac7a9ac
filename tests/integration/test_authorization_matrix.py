"""The authorization matrix: every route of the app, from the router, against the documented
permission table (docs/security.md), for anonymous callers, each role without grants, and
users holding each grant level; and every HTML form of every page, for each of them.

A route whose handler declares no permission fails :func:`test_every_route_declares_a_
permission`; a route missing from ``ROUTES`` fails :func:`test_route_table_is_complete`
(unless it is an admin-only page of another area, which is then checked by its declared
permission). Each subject then calls each route: a caller the table refuses must get 401
(API) or a redirect to the login page (pages) when anonymous, 404 when it may not even read
the object (a page it opens: 403 saying so), 403 otherwise; a caller the table allows
must not be refused.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

import httpx
import pytest
from litestar import Litestar

from backend.app import create_app
from backend.auth.policy import OBJECT_PERMISSIONS, ObjectKind
from backend.auth.policy import Permission as P
from backend.runtime import Runtime
from backend.settings import Settings
from backend.web.guards import declared_permission
from connectors import sdk
from tests.diagrams import diagram, node
from tests.integration.conftest import login
from tests.integration.flows import stored_file
from tests.integration.rbac import PASSWORD, grant, make_user

pytestmark = pytest.mark.integration

MATRIX_DOCUMENT = """
openapi: 3.0.3
info: {title: Matrix API, version: "1"}
servers: [{url: "https://matrix.example"}]
paths:
  /ping:
    get:
      operationId: ping
      responses: {"200": {description: ok}}
"""

# The documented table: (method, route path) -> the permission it needs.
ROUTES: dict[tuple[str, str], P] = {
    ("GET", "/"): P.PUBLIC,
    ("GET", "/metrics"): P.METRICS_READ,
    ("GET", "/admin/dashboard"): P.METRICS_READ,
    ("GET", "/admin/groups"): P.GROUPS_MANAGE,
    ("POST", "/admin/groups"): P.GROUPS_MANAGE,
    ("POST", "/admin/groups/{group_id:uuid}/delete"): P.GROUPS_MANAGE,
    ("POST", "/admin/groups/{group_id:uuid}/members"): P.GROUPS_MANAGE,
    ("POST", "/admin/groups/{group_id:uuid}/members/{user_id:uuid}/remove"): P.GROUPS_MANAGE,
    ("GET", "/admin/projects"): P.PROJECTS_MANAGE,
    ("POST", "/admin/projects"): P.PROJECTS_MANAGE,
    ("POST", "/admin/projects/move"): P.PROJECTS_MANAGE,
    ("POST", "/admin/projects/{project_id:uuid}/delete"): P.PROJECTS_MANAGE,
    ("POST", "/admin/projects/{project_id:uuid}/grants"): P.PROJECTS_MANAGE,
    ("POST", "/admin/projects/{project_id:uuid}/grants/{grant_id:uuid}/delete"): P.PROJECTS_MANAGE,
    ("POST", "/admin/service-accounts"): P.USERS_MANAGE,
    ("POST", "/admin/service-accounts/{user_id:uuid}/tokens"): P.TOKENS_MANAGE,
    ("GET", "/admin/tokens"): P.TOKENS_MANAGE,
    ("GET", "/admin/users"): P.USERS_MANAGE,
    ("POST", "/admin/users"): P.USERS_MANAGE,
    ("POST", "/admin/users/{user_id:uuid}/role"): P.USERS_MANAGE,
    ("POST", "/admin/users/{user_id:uuid}/deactivate"): P.USERS_MANAGE,
    ("POST", "/admin/users/{user_id:uuid}/reactivate"): P.USERS_MANAGE,
    ("POST", "/admin/users/{user_id:uuid}/reset-password"): P.USERS_MANAGE,
    ("POST", "/admin/users/{user_id:uuid}/sign-out-everywhere"): P.USERS_MANAGE,
    ("GET", "/admin/sessions"): P.USERS_MANAGE,
    ("POST", "/admin/sessions/{session_id:uuid}/revoke"): P.USERS_MANAGE,
    ("GET", "/api/v1/admin/users"): P.USERS_MANAGE,
    ("POST", "/api/v1/admin/users"): P.USERS_MANAGE,
    ("GET", "/api/v1/admin/users/{user_id:uuid}"): P.USERS_MANAGE,
    ("PATCH", "/api/v1/admin/users/{user_id:uuid}"): P.USERS_MANAGE,
    ("POST", "/api/v1/admin/users/{user_id:uuid}/deactivate"): P.USERS_MANAGE,
    ("POST", "/api/v1/admin/users/{user_id:uuid}/reactivate"): P.USERS_MANAGE,
    ("POST", "/api/v1/admin/users/{user_id:uuid}/password-reset"): P.USERS_MANAGE,
    ("POST", "/api/v1/admin/users/{user_id:uuid}/sign-out-everywhere"): P.USERS_MANAGE,
    ("GET", "/api/v1/admin/sessions"): P.USERS_MANAGE,
    ("DELETE", "/api/v1/admin/sessions/{session_id:uuid}"): P.USERS_MANAGE,
    ("POST", "/admin/tokens/{token_id:uuid}/revoke"): P.TOKENS_MANAGE,
    ("GET", "/api/v1/admin/groups"): P.GROUPS_MANAGE,
    ("GET", "/admin/connectors"): P.CONNECTORS_MANAGE,
    ("POST", "/admin/connectors"): P.CONNECTORS_MANAGE,
    ("GET", "/admin/connectors/{connector_name:str}"): P.CONNECTORS_MANAGE,
    ("GET", "/api/v1/admin/connectors"): P.CONNECTORS_MANAGE,
    ("POST", "/api/v1/admin/connectors"): P.CONNECTORS_MANAGE,
    ("GET", "/api/v1/admin/connectors/{connector_name:str}"): P.CONNECTORS_MANAGE,
    ("POST", "/api/v1/admin/connectors/{connector_name:str}/diff"): P.CONNECTORS_MANAGE,
    ("POST", "/api/v1/admin/groups"): P.GROUPS_MANAGE,
    ("DELETE", "/api/v1/admin/groups/{group_id:uuid}"): P.GROUPS_MANAGE,
    ("DELETE", "/api/v1/admin/groups/{group_id:uuid}/members/{user_id:uuid}"): P.GROUPS_MANAGE,
    ("PUT", "/api/v1/admin/groups/{group_id:uuid}/members/{user_id:uuid}"): P.GROUPS_MANAGE,
    ("GET", "/api/v1/admin/projects"): P.PROJECTS_MANAGE,
    ("POST", "/api/v1/admin/projects"): P.PROJECTS_MANAGE,
    ("POST", "/api/v1/admin/projects/move"): P.PROJECTS_MANAGE,
    ("DELETE", "/api/v1/admin/projects/{project_id:uuid}"): P.PROJECTS_MANAGE,
    ("GET", "/api/v1/admin/projects/{project_id:uuid}/grants"): P.PROJECTS_MANAGE,
    ("POST", "/api/v1/admin/projects/{project_id:uuid}/grants"): P.PROJECTS_MANAGE,
    (
        "DELETE",
        "/api/v1/admin/projects/{project_id:uuid}/grants/{grant_id:uuid}",
    ): P.PROJECTS_MANAGE,
    ("GET", "/api/v1/admin/service-accounts"): P.USERS_MANAGE,
    ("POST", "/api/v1/admin/service-accounts"): P.USERS_MANAGE,
    ("POST", "/api/v1/admin/service-accounts/{user_id:uuid}/tokens"): P.TOKENS_MANAGE,
    ("GET", "/api/v1/admin/tokens"): P.TOKENS_MANAGE,
    ("DELETE", "/api/v1/admin/tokens/{token_id:uuid}"): P.TOKENS_MANAGE,
    ("POST", "/api/v1/auth/login"): P.PUBLIC,
    ("POST", "/api/v1/auth/logout"): P.SESSIONS_OWN,
    ("GET", "/api/v1/auth/me"): P.AUTHENTICATED,
    ("GET", "/api/v1/auth/sessions"): P.AUTHENTICATED,
    ("DELETE", "/api/v1/auth/sessions/{session_id:uuid}"): P.SESSIONS_OWN,
    ("POST", "/api/v1/auth/sign-out-everywhere"): P.SESSIONS_OWN,
    ("GET", "/account"): P.AUTHENTICATED,
    ("POST", "/account/sessions/{session_id:uuid}/revoke"): P.SESSIONS_OWN,
    ("POST", "/account/sign-out-everywhere"): P.SESSIONS_OWN,
    ("GET", "/login/oidc"): P.PUBLIC,
    ("GET", "/login/oidc/callback"): P.PUBLIC,
    ("GET", "/reset-password/{token:str}"): P.PUBLIC,
    ("POST", "/reset-password/{token:str}"): P.PUBLIC,
    ("GET", "/api/v1/catalog"): P.AUTHENTICATED,
    ("GET", "/api/v1/credentials"): P.CREDENTIAL_LIST,
    ("POST", "/api/v1/credentials"): P.CREDENTIAL_CREATE,
    ("GET", "/api/v1/credentials/oauth2/callback"): P.AUTHENTICATED,
    ("GET", "/api/v1/credentials/types"): P.AUTHENTICATED,
    ("DELETE", "/api/v1/credentials/{credential_id:str}"): P.CREDENTIAL_MANAGE,
    ("GET", "/api/v1/credentials/{credential_id:str}"): P.CREDENTIAL_USE,
    ("PATCH", "/api/v1/credentials/{credential_id:str}"): P.CREDENTIAL_MANAGE,
    ("GET", "/api/v1/credentials/{credential_id:str}/connect"): P.CREDENTIAL_MANAGE,
    ("GET", "/api/v1/credentials/{credential_id:uuid}/grants"): P.CREDENTIAL_MANAGE,
    ("POST", "/api/v1/credentials/{credential_id:uuid}/grants"): P.CREDENTIAL_MANAGE,
    (
        "DELETE",
        "/api/v1/credentials/{credential_id:uuid}/grants/{grant_id:uuid}",
    ): P.CREDENTIAL_MANAGE,
    ("GET", "/api/v1/files/{file_id:uuid}"): P.FILE_READ,
    ("GET", "/api/v1/runs"): P.WORKFLOW_LIST,
    ("GET", "/api/v1/search"): P.WORKFLOW_LIST,
    ("GET", "/search"): P.WORKFLOW_LIST,
    ("GET", "/api/v1/runs/{run_id:uuid}"): P.RUN_READ,
    ("GET", "/api/v1/runs/{run_id:uuid}/children"): P.RUN_READ,
    ("GET", "/api/v1/runs/{run_id:uuid}/events"): P.RUN_READ,
    ("GET", "/api/v1/runs/{run_id:uuid}/values/{digest:str}"): P.RUN_READ,
    ("POST", "/api/v1/runs/{run_id:uuid}/cancel"): P.RUN_CONTROL,
    ("POST", "/api/v1/runs/{run_id:uuid}/pause"): P.RUN_CONTROL,
    ("POST", "/api/v1/runs/{run_id:uuid}/replay"): P.RUN_CONTROL,
    ("POST", "/api/v1/runs/{run_id:uuid}/rerun"): P.RUN_CONTROL,
    ("POST", "/api/v1/runs/{run_id:uuid}/resume"): P.RUN_CONTROL,
    ("GET", "/api/v1/tokens"): P.TOKENS_OWN,
    ("POST", "/api/v1/tokens"): P.TOKENS_OWN,
    ("DELETE", "/api/v1/tokens/{token_id:uuid}"): P.TOKENS_OWN,
    ("GET", "/api/v1/workflows"): P.WORKFLOW_LIST,
    ("POST", "/api/v1/workflows"): P.WORKFLOW_CREATE,
    ("POST", "/api/v1/workflows/{workflow_id:uuid}/expressions/fields"): P.WORKFLOW_READ,
    ("POST", "/api/v1/workflows/{workflow_id:uuid}/expressions/preview"): P.WORKFLOW_READ,
    ("POST", "/api/v1/workflows/{workflow_id:uuid}/expressions/infer-schema"): P.WORKFLOW_READ,
    ("GET", "/api/v1/workflows/{workflow_id:uuid}"): P.WORKFLOW_READ,
    ("DELETE", "/api/v1/workflows/{workflow_id:uuid}"): P.WORKFLOW_MANAGE,
    ("POST", "/api/v1/workflows/{workflow_id:uuid}/restore"): P.WORKFLOW_MANAGE,
    ("POST", "/api/v1/workflows/{workflow_id:uuid}/duplicate"): P.WORKFLOW_READ,
    ("PATCH", "/api/v1/workflows/{workflow_id:uuid}"): P.WORKFLOW_EDIT,
    ("POST", "/api/v1/workflows/{workflow_id:uuid}/compile"): P.WORKFLOW_READ,
    ("PUT", "/api/v1/workflows/{workflow_id:uuid}/draft"): P.WORKFLOW_EDIT,
    ("GET", "/api/v1/workflows/{workflow_id:uuid}/grants"): P.WORKFLOW_MANAGE,
    ("POST", "/api/v1/workflows/{workflow_id:uuid}/grants"): P.WORKFLOW_MANAGE,
    ("GET", "/api/v1/workflows/{workflow_id:uuid}/grants/subjects"): P.WORKFLOW_MANAGE,
    ("DELETE", "/api/v1/workflows/{workflow_id:uuid}/grants/{grant_id:uuid}"): P.WORKFLOW_MANAGE,
    ("POST", "/api/v1/workflows/{workflow_id:uuid}/publish"): P.WORKFLOW_EDIT,
    ("POST", "/api/v1/workflows/{workflow_id:uuid}/runs"): P.WORKFLOW_RUN,
    ("GET", "/api/v1/workflows/{workflow_id:uuid}/pins"): P.WORKFLOW_READ,
    ("PUT", "/api/v1/workflows/{workflow_id:uuid}/pins/{node_id:str}"): P.WORKFLOW_EDIT,
    ("DELETE", "/api/v1/workflows/{workflow_id:uuid}/pins/{node_id:str}"): P.WORKFLOW_EDIT,
    ("POST", "/api/v1/workflows/{workflow_id:uuid}/pins/{node_id:str}/delete"): P.WORKFLOW_EDIT,
    ("POST", "/api/v1/workflows/{workflow_id:uuid}/test-runs"): P.WORKFLOW_RUN,
    ("GET", "/api/v1/workflows/{workflow_id:uuid}/trigger-sample"): P.WORKFLOW_READ,
    ("POST", "/api/v1/workflows/{workflow_id:uuid}/trigger-sample"): P.WORKFLOW_EDIT,
    ("POST", "/api/v1/workflows/{workflow_id:uuid}/trigger-sample/stop"): P.WORKFLOW_EDIT,
    ("GET", "/api/v1/workflows/{workflow_id:uuid}/versions"): P.WORKFLOW_READ,
    ("GET", "/api/v1/workflows/{workflow_id:uuid}/versions/{number:int}"): P.WORKFLOW_READ,
    ("POST", "/api/v1/workflows/{workflow_id:uuid}/versions/{number:int}/restore"): P.WORKFLOW_EDIT,
    ("GET", "/api/v1/workflows/{workflow_id:uuid}/diff"): P.WORKFLOW_READ,
    ("GET", "/api/v1/workflows/{workflow_id:uuid}/export"): P.WORKFLOW_READ,
    ("POST", "/api/v1/workflows/{workflow_id:uuid}/import"): P.WORKFLOW_EDIT,
    ("POST", "/api/v1/workflows/import"): P.WORKFLOW_CREATE,
    ("GET", "/api/v1/workflows/{workflow_id:uuid}/webhook"): P.WORKFLOW_READ,
    ("GET", "/api/v1/workflows/{workflow_id:uuid}/webhook/deliveries"): P.WORKFLOW_READ,
    ("POST", "/api/v1/workflows/{workflow_id:uuid}/webhook/listen"): P.WORKFLOW_EDIT,
    ("DELETE", "/api/v1/workflows/{workflow_id:uuid}/webhook/secret"): P.WORKFLOW_EDIT,
    ("PUT", "/api/v1/workflows/{workflow_id:uuid}/webhook/secret"): P.WORKFLOW_EDIT,
    ("GET", "/api/v1/workflows/{workflow_id:uuid}/webhook/test-call"): P.WORKFLOW_READ,
    ("GET", "/catalog"): P.AUTHENTICATED,
    ("GET", "/catalog/icons/lucide.svg"): P.AUTHENTICATED,
    ("GET", "/catalog/icons/{connector:str}/{name:str}"): P.AUTHENTICATED,
    ("GET", "/credentials"): P.CREDENTIAL_LIST,
    ("POST", "/credentials"): P.CREDENTIAL_CREATE,
    ("POST", "/credentials/{credential_id:str}/delete"): P.CREDENTIAL_MANAGE,
    ("GET", "/credentials/{credential_id:uuid}/access"): P.CREDENTIAL_MANAGE,
    ("POST", "/credentials/{credential_id:uuid}/access"): P.CREDENTIAL_MANAGE,
    (
        "POST",
        "/credentials/{credential_id:uuid}/access/{grant_id:uuid}/delete",
    ): P.CREDENTIAL_MANAGE,
    ("POST", "/designer/config-panel"): P.AUTHENTICATED,
    ("GET", "/designer/workflow-options"): P.WORKFLOW_LIST,
    ("POST", "/designer/schedule-preview"): P.AUTHENTICATED,
    ("GET", "/health/live"): P.PUBLIC,
    ("GET", "/health/ready"): P.PUBLIC,
    ("DELETE", "/hooks/test/{token:str}"): P.PUBLIC,
    ("GET", "/hooks/test/{token:str}"): P.PUBLIC,
    ("PATCH", "/hooks/test/{token:str}"): P.PUBLIC,
    ("POST", "/hooks/test/{token:str}"): P.PUBLIC,
    ("PUT", "/hooks/test/{token:str}"): P.PUBLIC,
    ("DELETE", "/hooks/test/{token:str}/{suffix:path}"): P.PUBLIC,
    ("GET", "/hooks/test/{token:str}/{suffix:path}"): P.PUBLIC,
    ("PATCH", "/hooks/test/{token:str}/{suffix:path}"): P.PUBLIC,
    ("POST", "/hooks/test/{token:str}/{suffix:path}"): P.PUBLIC,
    ("PUT", "/hooks/test/{token:str}/{suffix:path}"): P.PUBLIC,
    ("GET", "/hooks/app/{token:str}"): P.PUBLIC,
    ("PATCH", "/hooks/app/{token:str}"): P.PUBLIC,
    ("POST", "/hooks/app/{token:str}"): P.PUBLIC,
    ("PUT", "/hooks/app/{token:str}"): P.PUBLIC,
    ("DELETE", "/hooks/{token:str}"): P.PUBLIC,
    ("GET", "/hooks/{token:str}"): P.PUBLIC,
    ("PATCH", "/hooks/{token:str}"): P.PUBLIC,
    ("POST", "/hooks/{token:str}"): P.PUBLIC,
    ("PUT", "/hooks/{token:str}"): P.PUBLIC,
    ("DELETE", "/hooks/{token:str}/{suffix:path}"): P.PUBLIC,
    ("GET", "/hooks/{token:str}/{suffix:path}"): P.PUBLIC,
    ("PATCH", "/hooks/{token:str}/{suffix:path}"): P.PUBLIC,
    ("POST", "/hooks/{token:str}/{suffix:path}"): P.PUBLIC,
    ("PUT", "/hooks/{token:str}/{suffix:path}"): P.PUBLIC,
    ("GET", "/login"): P.PUBLIC,
    ("POST", "/login"): P.PUBLIC,
    ("POST", "/logout"): P.PUBLIC,
    ("GET", "/runs"): P.WORKFLOW_LIST,
    ("GET", "/runs/{run_id:uuid}"): P.RUN_READ,
    ("GET", "/runs/{run_id:uuid}/events"): P.RUN_READ,
    ("GET", "/tokens"): P.TOKENS_OWN,
    ("POST", "/tokens"): P.TOKENS_OWN,
    ("POST", "/tokens/{token_id:uuid}/revoke"): P.TOKENS_OWN,
    ("GET", "/workflows"): P.WORKFLOW_LIST,
    ("POST", "/workflows"): P.WORKFLOW_CREATE,
    ("POST", "/workflows/{workflow_id:uuid}/details"): P.WORKFLOW_EDIT,
    ("POST", "/workflows/{workflow_id:uuid}/duplicate"): P.WORKFLOW_READ,
    ("POST", "/workflows/{workflow_id:uuid}/archive"): P.WORKFLOW_MANAGE,
    ("POST", "/workflows/{workflow_id:uuid}/restore"): P.WORKFLOW_MANAGE,
    ("GET", "/workflows/{workflow_id:uuid}/access"): P.WORKFLOW_MANAGE,
    ("POST", "/workflows/{workflow_id:uuid}/access"): P.WORKFLOW_MANAGE,
    ("POST", "/workflows/{workflow_id:uuid}/access/{grant_id:uuid}/delete"): P.WORKFLOW_MANAGE,
    ("GET", "/workflows/{workflow_id:uuid}/deliveries"): P.WORKFLOW_READ,
    ("GET", "/workflows/{workflow_id:uuid}/trigger"): P.WORKFLOW_READ,
    ("GET", "/workflows/{workflow_id:uuid}/designer"): P.WORKFLOW_READ,
    ("GET", "/workflows/{workflow_id:uuid}/versions"): P.WORKFLOW_READ,
    ("GET", "/workflows/{workflow_id:uuid}/compare"): P.WORKFLOW_READ,
    ("GET", "/api/v1/workflows/{workflow_id:uuid}/subscriptions"): P.WORKFLOW_MANAGE,
    ("POST", "/api/v1/workflows/{workflow_id:uuid}/subscriptions"): P.WORKFLOW_MANAGE,
    (
        "GET",
        "/api/v1/workflows/{workflow_id:uuid}/subscriptions/{subscription_id:uuid}",
    ): P.WORKFLOW_MANAGE,
    (
        "PATCH",
        "/api/v1/workflows/{workflow_id:uuid}/subscriptions/{subscription_id:uuid}",
    ): P.WORKFLOW_MANAGE,
    (
        "DELETE",
        "/api/v1/workflows/{workflow_id:uuid}/subscriptions/{subscription_id:uuid}",
    ): P.WORKFLOW_MANAGE,
    (
        "GET",
        "/api/v1/workflows/{workflow_id:uuid}/subscriptions/{subscription_id:uuid}/deliveries",
    ): P.WORKFLOW_MANAGE,
    (
        "POST",
        "/api/v1/workflows/{workflow_id:uuid}/subscriptions/{subscription_id:uuid}/deliveries/{delivery_id:uuid}/resend",
    ): P.WORKFLOW_MANAGE,
    ("GET", "/api/v1/admin/subscriptions"): P.PROJECTS_MANAGE,
    ("POST", "/api/v1/admin/subscriptions"): P.PROJECTS_MANAGE,
    ("GET", "/api/v1/admin/subscriptions/{subscription_id:uuid}"): P.PROJECTS_MANAGE,
    ("PATCH", "/api/v1/admin/subscriptions/{subscription_id:uuid}"): P.PROJECTS_MANAGE,
    ("DELETE", "/api/v1/admin/subscriptions/{subscription_id:uuid}"): P.PROJECTS_MANAGE,
    ("GET", "/api/v1/admin/subscriptions/{subscription_id:uuid}/deliveries"): P.PROJECTS_MANAGE,
    (
        "POST",
        "/api/v1/admin/subscriptions/{subscription_id:uuid}/deliveries/{delivery_id:uuid}/resend",
    ): P.PROJECTS_MANAGE,
    ("GET", "/workflows/{workflow_id:uuid}/subscriptions"): P.WORKFLOW_MANAGE,
    ("POST", "/workflows/{workflow_id:uuid}/subscriptions"): P.WORKFLOW_MANAGE,
    (
        "GET",
        "/workflows/{workflow_id:uuid}/subscriptions/{subscription_id:uuid}",
    ): P.WORKFLOW_MANAGE,
    (
        "POST",
        "/workflows/{workflow_id:uuid}/subscriptions/{subscription_id:uuid}/deliveries/{delivery_id:uuid}/resend",
    ): P.WORKFLOW_MANAGE,
    (
        "POST",
        "/workflows/{workflow_id:uuid}/subscriptions/{subscription_id:uuid}/state",
    ): P.WORKFLOW_MANAGE,
    (
        "POST",
        "/workflows/{workflow_id:uuid}/subscriptions/{subscription_id:uuid}/delete",
    ): P.WORKFLOW_MANAGE,
}

# Who is tested (role, then the grant held). The workflow W, its run and file, and the
# credential C belong to the admin; the grant-holding subjects hold the named level on W
# (and on C).
SUBJECTS = (
    "anonymous",
    "admin",
    "editor",
    "operator",
    "viewer",
    "viewer_read",
    "viewer_edit",
    "operator_run",
    "operator_manage",
    "editor_edit",
    "editor_manage",
)
ROLE_OF = {s: s.split("_")[0] for s in SUBJECTS if s != "anonymous"}
GRANTS: dict[str, tuple[str | None, str | None]] = {  # subject -> (level on W, level on C)
    "viewer_read": ("read", None),
    "viewer_edit": ("edit", "manage"),  # capped by the role: reads W, uses (sees) C
    "operator_run": ("run", None),
    "operator_manage": ("manage", "use"),  # capped by the role: runs W, uses C
    "editor_edit": ("edit", "use"),
    "editor_manage": ("manage", "manage"),
}
LOGGED_IN = set(SUBJECTS) - {"anonymous"}
EDITORS = {"admin", "editor", "editor_edit", "editor_manage"}
W_RUN = {"admin", "operator_run", "operator_manage", "editor_edit", "editor_manage"}
W_READ = W_RUN | {"viewer_read", "viewer_edit"}
C_USE = {"admin", "viewer_edit", "operator_manage", "editor_edit", "editor_manage"}

# The permission table (docs/security.md): permission -> subjects allowed.
ALLOWED: dict[P, set[str]] = {
    P.PUBLIC: set(SUBJECTS),
    P.AUTHENTICATED: LOGGED_IN,
    P.TOKENS_OWN: LOGGED_IN,
    P.SESSIONS_OWN: LOGGED_IN,
    P.WORKFLOW_LIST: LOGGED_IN,
    P.CREDENTIAL_LIST: LOGGED_IN,
    P.WORKFLOW_CREATE: EDITORS,
    P.CREDENTIAL_CREATE: EDITORS,
    P.USERS_MANAGE: {"admin"},
    P.GROUPS_MANAGE: {"admin"},
    P.PROJECTS_MANAGE: {"admin"},
    P.AUDIT_READ: {"admin"},
    P.SETTINGS_READ: {"admin"},
    P.METRICS_READ: {"admin"},
    P.TOKENS_MANAGE: {"admin"},
    P.CONNECTORS_MANAGE: {"admin"},
    P.WORKFLOW_READ: W_READ,
    P.RUN_READ: W_READ,
    P.FILE_READ: W_READ,
    P.WORKFLOW_RUN: W_RUN,
    P.RUN_CONTROL: W_RUN,
    P.WORKFLOW_EDIT: {"admin", "editor_edit", "editor_manage"},
    P.WORKFLOW_MANAGE: {"admin", "editor_manage"},
    P.CREDENTIAL_USE: C_USE,
    P.CREDENTIAL_MANAGE: {"admin", "editor_manage"},
}
READERS = {ObjectKind.WORKFLOW: W_READ, ObjectKind.CREDENTIAL: C_USE}
ADMIN_ONLY = {P.USERS_MANAGE, P.AUDIT_READ, P.SETTINGS_READ, P.TOKENS_MANAGE}


def _handlers(app: Litestar) -> list[tuple[str, str, Any]]:
    """(method, path, handler) of every route of the app (OPTIONS/HEAD are Litestar's)."""
    found = []
    for route in app.routes:
        for handler in getattr(route, "route_handlers", []):
            for method in sorted(set(getattr(handler, "http_methods", ())) - {"OPTIONS", "HEAD"}):
                found.append((method, route.path, handler))
    return found


def _skip(path: str) -> bool:
    """OpenAPI documents and static files are public by declaration (checked below)."""
    return path.startswith(("/schema", "/static"))


def test_every_route_declares_a_permission(settings: Settings) -> None:
    app = create_app(settings)
    missing = [f"{m} {p}" for m, p, h in _handlers(app) if declared_permission(h) is None]
    assert missing == [], f"routes without opt={{'permission': ...}}: {missing}"
    public = {declared_permission(h) for m, p, h in _handlers(app) if _skip(p)}
    assert public == {P.PUBLIC}


def test_route_table_is_complete(settings: Settings) -> None:
    app = create_app(settings)
    declared = {(m, p): declared_permission(h) for m, p, h in _handlers(app) if not _skip(p)}
    for key, permission in ROUTES.items():
        assert key in declared, f"documented route {key} no longer exists"
        assert declared[key] is permission, f"{key}: declares {declared[key]}, table {permission}"
    undocumented = {k: v for k, v in declared.items() if k not in ROUTES and v not in ADMIN_ONLY}
    assert undocumented == {}, f"add these routes to the table: {undocumented}"


def test_table_covers_every_permission() -> None:
    assert set(ALLOWED) == set(P)


@dataclass
class World:
    """The objects the routes' path parameters name, and a client per subject."""

    params: dict[str, str]
    clients: dict[str, httpx.AsyncClient]


async def _world(
    stack: AsyncExitStack, settings: Settings, runtime: Runtime, admin: httpx.AsyncClient
) -> World:
    cred = (
        await admin.post(
            "/api/credentials", json={"name": "C", "type": "bearer", "data": {"token": "t0k"}}
        )
    ).json()["id"]
    wf = (await admin.post("/api/workflows", json={"name": "W"})).json()
    # a plugin with an icon of its own (/catalog/icons/{connector}/{name})
    runtime.catalog.add_connector(
        sdk.Connector(
            "matrix",
            "Matrix",
            "1",
            icon="matrix-logo",
            icons={"matrix-logo": "icons/acme.svg"},
            package="tests.unit.services.plugin_icons",
        ),
        source="railyard-matrix 1",
    )
    d = diagram([node("hook", "trigger.webhook")], [])
    assert (await admin.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": d})).json()["ok"]
    assert (await admin.post(f"/api/workflows/{wf['id']}/publish")).status_code == 201
    # an input above the inline limit is stored by reference: the run holds a downloadable value
    big = {"blob": "x" * (300 * 1024)}
    run = (await admin.post(f"/api/workflows/{wf['id']}/runs", json={"input": big})).json()
    await admin.post(f"/api/runs/{run['run_id']}/cancel")  # ended: its SSE stream ends
    detail = (await admin.get(f"/api/runs/{run['run_id']}")).text
    digest = re.search(r"/values/([0-9a-f]{64})", detail)
    assert digest, "the run's large input must be offered for download"
    token = (await admin.post("/api/tokens", json={"name": "t"})).json()["id"]
    group = (await admin.post("/api/admin/groups", json={"name": "G"})).json()["id"]
    imported = await admin.post(
        "/api/admin/connectors", json={"name": "matrix_api", "document": MATRIX_DOCUMENT}
    )
    assert imported.status_code == 201, imported.text
    project = (await admin.post("/api/admin/projects", json={"name": "P"})).json()["id"]
    subscription = await admin.post(
        f"/api/v1/workflows/{wf['id']}/subscriptions",
        json={"url": "http://127.0.0.1:9/matrix", "events": ["run.failed"]},
    )
    assert subscription.status_code == 201, subscription.text
    file_id = await stored_file(runtime, wf["id"])
    clients: dict[str, httpx.AsyncClient] = {"admin": admin}
    ids: dict[str, uuid.UUID] = {}
    for subject in SUBJECTS:
        if subject in ("anonymous", "admin"):
            continue
        ids[subject] = await make_user(runtime, f"{subject}@example.com", ROLE_OF[subject])
        w_level, c_level = GRANTS.get(subject, (None, None))
        if w_level:
            await grant(runtime, "workflow", wf["id"], f"user:{ids[subject]}", w_level)
        if c_level:
            await grant(runtime, "credential", cred, f"user:{ids[subject]}", c_level)
    grant_id = await grant(runtime, "project", project, f"user:{ids['viewer']}", "read")
    for subject in SUBJECTS:
        if subject == "admin":
            continue
        transport = httpx.ASGITransport(app=create_app(settings, runtime))
        c = await stack.enter_async_context(
            httpx.AsyncClient(transport=transport, base_url="http://testserver.local")
        )
        if subject == "anonymous":
            await c.get("/login")
            c.headers["x-csrftoken"] = c.cookies.get("csrftoken") or ""
        else:
            await login(c, f"{subject}@example.com", PASSWORD)
        clients[subject] = c
    params = {
        "workflow_id": wf["id"],
        "run_id": run["run_id"],
        "digest": digest[1],
        "credential_id": cred,
        "file_id": file_id,
        "token_id": token,
        "group_id": group,
        "project_id": project,
        "subscription_id": subscription.json()["id"],
        "delivery_id": str(uuid.uuid4()),  # refused callers never reach the lookup
        "grant_id": str(grant_id),
        "user_id": str(ids["viewer"]),
        "number": "1",  # the version W published above
        "session_id": str(uuid.uuid4()),  # own-session routes: anyone's unknown id is a 404
        "connector": "matrix",  # the plugin icon added above
        "connector_name": "matrix_api",  # the OpenAPI connector imported above
        "name": "matrix-logo.svg",
    }
    return World(params, clients)


def _fill(path: str, params: dict[str, str]) -> str:
    return re.sub(r"\{(\w+):\w+\}", lambda m: params.get(m.group(1), "x"), path)


def _expected(permission: P, subject: str, method: str = "GET", path: str = "/api") -> str:
    """allow | login | hide | forbid, from the table. A page the browser opens (a ``GET``
    outside ``/api``) says "no access" (403) where the API hides the object (404)."""
    if subject in ALLOWED[permission]:
        return "allow"
    if subject == "anonymous":
        return "login"
    needed = OBJECT_PERMISSIONS.get(permission)
    if needed is not None and subject not in READERS[needed[0]]:
        return "forbid" if method == "GET" and not path.startswith("/api/") else "hide"
    return "forbid"


def _outcome(r: httpx.Response) -> str:
    if r.status_code == 401 or (
        r.status_code in (302, 303) and r.headers["location"].startswith("/login")
    ):
        return "login"
    if r.status_code == 403:
        return "forbid"
    if r.status_code == 404:
        return "hide"
    return "allow"


@pytest.fixture
async def world(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime
) -> AsyncIterator[World]:
    async with AsyncExitStack() as stack:
        yield await _world(stack, settings, runtime, client)


async def test_authorization_matrix(world: World) -> None:
    """Every route x every subject: refused exactly as the table says. Unsafe requests are
    sent only where the table refuses them (an allowed one would change the world); safe
    ones both ways."""
    failures = []
    for (method, path), permission in sorted(ROUTES.items()):
        if permission is P.PUBLIC:
            continue  # reachable by everyone; webhooks and login have their own tests
        url = _fill(path, world.params)
        for subject in SUBJECTS:
            expected = _expected(permission, subject, method, path)
            if method != "GET" and expected == "allow":
                continue
            r = await world.clients[subject].request(
                method, url, json={} if method in ("POST", "PUT", "PATCH") else None
            )
            assert r.status_code < 500, (method, url, subject, r.text)
            got = _outcome(r)
            ok = got == expected  # every object exists: an allowed GET is never a 404
            if not ok:
                failures.append(f"{subject:14} {method:6} {path}: {got} ({r.status_code})")
    assert failures == [], "\n" + "\n".join(failures)


# Session and account routes (one's sessions, account page, own tokens) reached with an
# admin's API token of each scope and no cookie: reading one's account needs any scope;
# ending sessions and one's own tokens need the admin scope (docs/security.md, "API
# tokens and service accounts").
ACCOUNT_PATHS = ("/api/v1/auth/", "/account", "/api/v1/tokens", "/tokens")
TOKEN_SCOPES = ("read", "run", "edit", "admin")
SCOPES_ALLOWED: dict[P, set[str]] = {
    P.AUTHENTICATED: set(TOKEN_SCOPES),
    P.SESSIONS_OWN: {"admin"},
    P.TOKENS_OWN: {"admin"},
}


async def test_token_scopes_on_session_and_account_routes(
    world: World, settings: Settings, runtime: Runtime
) -> None:
    """Every session and account route x every token scope: refused (403) exactly where
    the scope is too weak. A read token cannot end its owner's browser sessions (the
    admin's session still works after every refused call)."""
    admin = world.clients["admin"]
    routes = sorted(
        (key, permission)
        for key, permission in ROUTES.items()
        if key[1].startswith(ACCOUNT_PATHS) and permission is not P.PUBLIC
    )
    assert {p for _, p in routes} == set(SCOPES_ALLOWED)
    own = (await admin.get("/api/auth/sessions")).json()
    params = {**world.params, "session_id": own[0]["id"]}  # the admin's own live session
    failures = []
    for scope in TOKEN_SCOPES:
        made = await admin.post("/api/tokens", json={"name": scope, "scopes": [scope]})
        transport = httpx.ASGITransport(app=create_app(settings, runtime))
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://testserver.local",
            headers={"Authorization": f"Bearer {made.json()['token']}"},
        ) as c:
            for (method, path), permission in routes:
                allowed = scope in SCOPES_ALLOWED[permission]
                if method != "GET" and allowed:
                    continue  # an allowed unsafe call would change the world
                r = await c.request(
                    method, _fill(path, params), json={} if method == "POST" else None
                )
                got = "allow" if r.status_code < 400 else str(r.status_code)
                if got != ("allow" if allowed else "403"):
                    failures.append(f"{scope:5} {method:6} {path}: {r.status_code}")
    assert failures == [], "\n" + "\n".join(failures)
    assert (await admin.get("/api/auth/me")).status_code == 200
    assert [s["id"] for s in (await admin.get("/api/auth/sessions")).json()] == [own[0]["id"]]


class _Forms(HTMLParser):
    """Collects (method, action) of every <form>."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "form":
            a = dict(attrs)
            self.forms.append(((a.get("method") or "get").upper(), a.get("action") or ""))


def _route_of(method: str, action: str) -> tuple[str, str] | None:
    for m, path in ROUTES:
        pattern = re.sub(r"\{\w+:path\}", ".+", path)
        pattern = re.sub(r"\{\w+:\w+\}", "[^/]+", pattern)
        if m == method and re.fullmatch(pattern, action):
            return (m, path)
    return None


async def test_every_form_posts_to_a_declared_route_its_viewer_may_use(world: World) -> None:
    """Render every page as every subject: each form's action is a documented route, and a
    form is shown only to subjects the table allows to use it (Publish, Run, Delete and the
    admin forms are hidden from the rest)."""
    pages = [
        p
        for (m, p), perm in ROUTES.items()
        if m == "GET" and not p.startswith(("/api", "/hooks", "/health"))
    ]
    failures = []
    seen_actions = 0
    for subject in SUBJECTS:
        for path in pages:
            if path.endswith("/events"):
                continue
            r = await world.clients[subject].get(_fill(path, world.params))
            if r.status_code != 200 or "text/html" not in r.headers.get("content-type", ""):
                continue
            parser = _Forms()
            parser.feed(r.text)
            for method, action in parser.forms:
                if method == "DIALOG" or (method == "GET" and action == "/runs"):
                    continue
                seen_actions += 1
                route = _route_of(method, action.split("?")[0].split("#")[0])
                if route is None:
                    failures.append(f"{subject}: {path} has a form to {method} {action}: no route")
                    continue
                if _expected(ROUTES[route], subject) != "allow":
                    failures.append(f"{subject}: {path} shows a form to {method} {action}")
    assert seen_actions > 20
    assert failures == [], "\n" + "\n".join(failures)
