"""The Litestar application: JSON API, webhooks, pages, static files, OpenAPI at /schema."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
from litestar import Litestar, Request, Response, Router
from litestar.config.csrf import CSRFConfig
from litestar.exceptions import HTTPException, NotAuthorizedException
from litestar.logging.config import LoggingConfig
from litestar.middleware.base import DefineMiddleware
from litestar.static_files import create_static_files_router

from backend.api import json_body, malformed_ids, strict_query
from backend.api.admin_access import GroupController, ProjectController
from backend.api.admin_connectors import ConnectorAdminController
from backend.api.admin_tokens import AdminTokenController, ServiceAccountController
from backend.api.allow import correct_options_allow
from backend.api.app_webhooks import AppWebhookController
from backend.api.audit import AuditController, SettingsController
from backend.api.auth import AuthController
from backend.api.catalog import CatalogController
from backend.api.catalog_freshness import current_catalog
from backend.api.credentials import CredentialController
from backend.api.draft_runs import PinController, TestRunController
from backend.api.errors import API_EXCEPTION_HANDLERS, ErrorHandler, http_error
from backend.api.expressions import ExpressionController
from backend.api.grants import CredentialGrantController, WorkflowGrantController
from backend.api.health import HealthController
from backend.api.lists import link_next
from backend.api.locations import CreatedLocation
from backend.api.metrics import MetricsController
from backend.api.openapi import StrictStructSchemaPlugin, document_responses, openapi_config
from backend.api.runs import RunController
from backend.api.search import SearchController
from backend.api.storable_input import DEFAULT_MAX_SCAN_BYTES, StorableInputMiddleware
from backend.api.strict_query import refuse_unknown_query
from backend.api.subscriptions import AdminSubscriptionController, WorkflowSubscriptionController
from backend.api.telemetry import TelemetryMiddleware
from backend.api.trigger_samples import TriggerSampleController
from backend.api.triggers import ApiTokenController, FileController, WebhookSettingsController
from backend.api.users import SessionAdminController, UserAdminController
from backend.api.versioning import UnversionedAlias
from backend.api.webhook_front import WebhookFront
from backend.api.webhooks import WebhookController
from backend.api.workflow_versions import WorkflowVersionController
from backend.api.workflows import WorkflowController
from backend.auth.policy import Permission
from backend.observability import gc_pauses
from backend.runtime import Runtime, build_runtime
from backend.settings import Settings
from backend.web.authentication import BearerAwareCSRFMiddleware, RequestContextMiddleware
from backend.web.guards import authorize, permission_opt
from backend.web.security_headers import SecurityHeaders, served_over_https
from backend.workers.run_control import eager_control
from frontend.access_pages import AccessPages
from frontend.admin_pages import AdminPages
from frontend.audit_pages import AdminAuditPages
from frontend.connector_pages import ConnectorPages
from frontend.dashboard_pages import DashboardPages
from frontend.designer_fragments import DesignerFragments
from frontend.identity_pages import AccountPages, SsoPages
from frontend.import_pages import ImportPages
from frontend.pages import AppPages, AuthPages, html_error, wants_html
from frontend.rendering import STATIC
from frontend.search_pages import SearchPages
from frontend.subscription_pages import SubscriptionPages
from frontend.trigger_pages import TriggerPages
from frontend.user_admin_pages import AdminUserPages
from frontend.version_pages import VersionPages
from frontend.workflow_pages import WorkflowPages


def _http_error(request: Request, exc: HTTPException) -> Response[Any]:
    """Browser pages get the styled error page; everything else gets a JSON error."""
    if wants_html(request):
        message = "Page not found." if exc.status_code == 404 else str(exc.detail)
        return html_error(request, exc.status_code, message)  # type: ignore[return-value]
    return http_error(request, exc)  # problem details; 405 keeps Allow


def _pages_get_html(handler: ErrorHandler) -> Any:
    """Wrap a JSON error handler: a browser page request gets the styled HTML error page
    instead (same status, same message, ``Retry-After`` kept)."""

    def handle(request: Request, exc: Any) -> Response[Any]:
        response = handler(request, exc)
        if not wants_html(request) or not isinstance(response.content, bytes):
            return response
        detail = msgspec.json.decode(response.content).get("detail", "")
        page = html_error(request, response.status_code or 500, str(detail))
        if "Retry-After" in response.headers:
            page.headers["Retry-After"] = response.headers["Retry-After"]
        return page

    return handle


def create_app(
    settings: Settings, runtime: Runtime | None = None, *, tune_gc: bool = False
) -> Litestar:
    """Build the ASGI app. Without ``runtime`` one is built at startup and closed at shutdown.

    ``tune_gc`` (the ``railyard api`` and ``railyard dev`` processes): once that runtime is
    built, the process's garbage collector is tuned and its pauses measured
    (:func:`backend.observability.gc_pauses.configure`); tests serving the app in their
    own process leave it alone.
    """

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncGenerator[None, None]:
        if runtime is not None:
            yield
            return
        # connections kept open: requests beyond them each open (and close) their own
        built = app.state.runtime = await build_runtime(
            settings, pool_size=settings.api_db_pool_size, name="api"
        )
        await built.load_imported_connectors()
        if tune_gc:
            gc_pauses.configure()
        try:
            grace = settings.shutdown_grace
            async with eager_control(built.redis, built.execution, grace_seconds=grace):
                yield
        finally:
            await app.state.runtime.close()

    app = Litestar(
        route_handlers=[
            AuthController,
            UserAdminController,
            SessionAdminController,
            AuditController,
            SettingsController,
            WorkflowController,
            ExpressionController,
            WorkflowVersionController,
            RunController,
            PinController,
            TestRunController,
            TriggerSampleController,
            SearchController,
            CatalogController,
            CredentialController,
            AppWebhookController,
            WebhookController,
            WebhookSettingsController,
            ApiTokenController,
            AdminTokenController,
            ConnectorAdminController,
            ServiceAccountController,
            GroupController,
            ProjectController,
            WorkflowGrantController,
            CredentialGrantController,
            WorkflowSubscriptionController,
            AdminSubscriptionController,
            FileController,
            TriggerPages,
            SearchPages,
            HealthController,
            MetricsController,
            AuthPages,
            AppPages,
            DesignerFragments,
            WorkflowPages,
            ConnectorPages,
            AdminPages,
            ImportPages,
            AccessPages,
            SubscriptionPages,
            VersionPages,
            SsoPages,
            AccountPages,
            AdminUserPages,
            AdminAuditPages,
            DashboardPages,
            create_static_files_router(
                path="/static",
                directories=[STATIC],
                name="static",
                opt=permission_opt(Permission.PUBLIC),
            ),
        ],
        guards=[authorize, refuse_unknown_query, json_body.refuse_non_json_body],
        before_request=current_catalog,
        after_request=link_next,
        lifespan=[lifespan],
        before_send=[
            SecurityHeaders(https=served_over_https(settings.base_url, settings.secure_cookies))
        ],
        middleware=[
            TelemetryMiddleware(),
            RequestContextMiddleware(),
            CreatedLocation(),
            # before CSRF: it reads the body before CSRF's form lookup and hands it on
            StorableInputMiddleware(max(DEFAULT_MAX_SCAN_BYTES, settings.webhook_max_body)),
            DefineMiddleware(
                BearerAwareCSRFMiddleware,
                config=CSRFConfig(
                    secret=settings.secret_key,
                    cookie_secure=settings.secure_cookies,
                    exclude=["/hooks", "/health"],
                ),
            ),
        ],
        exception_handlers={
            **{k: _pages_get_html(h) for k, h in API_EXCEPTION_HANDLERS.items()},
            # by type, not status: a page controller's own NotAuthorizedException handler
            # (redirect to the login page) overrides this one for its routes
            NotAuthorizedException: _http_error,
            403: _http_error,
            404: _http_error,
            405: _http_error,
            HTTPException: _http_error,
        },
        openapi_config=openapi_config(
            "0.1.0",
            Router(
                path="/schema",
                route_handlers=[],
                opt=permission_opt(Permission.PUBLIC),
                include_in_schema=False,
            ),
        ),
        plugins=[StrictStructSchemaPlugin()],
        # the process owns the root logger (level RAILYARD_LOG_LEVEL, one format: backend/cli)
        logging_config=LoggingConfig(configure_root_logger=False),
        debug=False,
    )
    document_responses(app)
    correct_options_allow(app)
    strict_query.install(app)
    json_body.install(app)
    malformed_ids.install(app)
    # ordinary webhook deliveries skip the routing, guard and middleware layers (same checks)
    WebhookFront.install(app, max(DEFAULT_MAX_SCAN_BYTES, settings.webhook_max_body))
    # the unversioned /api paths of before answer as /api/v1 until their sunset
    UnversionedAlias.install(app)
    if runtime is not None:
        app.state.runtime = runtime
    return app
