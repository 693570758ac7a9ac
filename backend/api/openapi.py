"""The OpenAPI document at ``/schema``: security schemes, every status, the vendored UI.

Every operation's answers are documented in one place instead of on each route decorator:

- statuses that follow from how a route is built are derived from it
  (:func:`document_responses`): 401 behind a guard, 403 for unsafe methods checked for
  CSRF, 404 when the path names a resource, 503 when PostgreSQL or Redis cannot be reached
  (every operation that reads them), 400 on every ``/api`` operation (parameters and bodies
  are validated, unknown query parameters refused), replacing Litestar's own 400 schema,
  415 on every ``/api`` operation taking a JSON body (:mod:`backend.api.json_body`);
- statuses a handler decides itself (409 for a run that is not active, 422 for a rejected
  publish, the webhook answers, ...) are listed per ``operation_id`` in :data:`ANSWERS`.

Guarded operations declare both security schemes: ``bearer`` (``Authorization: Bearer
<API token>``, created under ``/api/v1/tokens``) and ``session`` (the login cookie; unsafe
methods then also need the ``X-CSRFToken`` header). The API docs UI is Swagger UI served
from ``frontend/static/vendor/swagger-ui`` (pinned version, licence beside it), so it works
without internet access.
"""

from __future__ import annotations

from typing import Any, cast

import msgspec
from litestar import Litestar, Router
from litestar._openapi.schema_generation.plugins.struct import StructSchemaPlugin
from litestar.datastructures import ResponseHeader
from litestar.handlers import HTTPRouteHandler
from litestar.openapi import OpenAPIConfig, ResponseSpec
from litestar.openapi.plugins import JsonRenderPlugin, SwaggerRenderPlugin
from litestar.openapi.spec import Components, Schema, SecurityScheme
from litestar.routes import HTTPRoute
from litestar.typing import FieldDefinition

from backend import problems
from backend.api.lists import ListPage
from backend.api.locations import LOCATIONS
from backend.api.schemas import PublishOut
from backend.auth.policy import Permission
from backend.problems import Problem
from backend.services.triggers.webhook_answers import CapturedTestCall, RunLinks
from backend.web.guards import declared_permission
from backend.web.run_events import RunStreamEvent
from designer_schema.transfer import WorkflowExport

SWAGGER_UI = "/static/vendor/swagger-ui"
"""Where the vendored Swagger UI files are served."""

SECURITY: list[dict[str, list[str]]] = [{"bearer": []}, {"session": []}]
"""Either scheme authenticates a guarded operation."""

_UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_CSRF_EXEMPT = ("/hooks", "/health")

_REASONS: dict[int, str] = {
    400: "Invalid input: `detail` says what, `errors` where (a body `pointer` or a `parameter`)",
    401: "Not logged in: no valid session cookie or API token",
    403: "Refused: the caller's role, grants or token scopes do not allow it, or the CSRF "
    "token is missing or wrong (cookie sessions, unsafe methods)",
    404: "No such resource",
    405: "Method not allowed; `Allow` lists the methods that are",
    409: "Conflict with the resource's current state (see `detail`)",
    413: "Body larger than the limit",
    415: "The body was not sent as JSON (`Content-Type: application/json`)",
    422: "Rejected: the diagram has errors (`diagnostics`)",
    429: "Rate limit reached; retry after `Retry-After` seconds",
    503: "PostgreSQL or Redis cannot be reached right now; try again shortly",
}

_WEBHOOK: dict[int | str, str] = {
    200: "The run's answer (`respond` = `respond_node` or `last_step`)",
    400: "The body cannot be parsed (`detail` says where) or breaks a limit",
    401: "Authentication of the webhook failed",
    404: "No published workflow at this URL (or the webhook is disabled)",
    410: "The workflow was archived: its webhook starts no runs",
    405: "The trigger does not accept this method; `Allow` lists those it does",
    413: "Body larger than the trigger's `max_body`",
    429: "Rate limit reached; retry after `Retry-After` seconds",
    500: "The run failed, was cancelled or timed out: `run_id`, `status`, `detail` (with "
    "`failure_answer: detailed`, the run's `error` instead of `detail`)",
    503: "PostgreSQL or Redis cannot be reached right now; try again shortly",
    "default": "What the workflow's Respond step answers: any status, headers and body",
}

_WEBHOOK_ACCEPTED_ANSWER = (
    "The run was accepted (`respond` = `immediately`, or the wait ran out): its `run_id`, "
    "`status`, page (`url`) and API status URL (`status_url`, also in `Location`)",
    RunLinks,
)

_TEST_WEBHOOK: dict[int | str, str | tuple[str, Any]] = {
    **{k: v for k, v in _WEBHOOK.items() if k not in (200, 500, "default")},
    200: ("The test call was captured for the designer's field mapping", CapturedTestCall),
    422: "The body breaks the trigger's body schema",
}
"""The designer's test URL: no run starts, so no run's answer (200 is the capture)."""

ANSWERS: dict[str, dict[int, str | tuple[str, Any]]] = {
    "publish_workflow": {
        200: ("The draft equals the active version: nothing new was published", PublishOut),
        409: "The workflow is archived",
        422: _REASONS[422],
    },
    "start_run": {409: "The workflow has no published version"},
    "pause_run": {409: "The run is not running or waiting"},
    "cancel_run": {409: "The run has already ended"},
    "save_draft": {409: "The draft moved on since `base_revision` (`revision`, `saved_by`)"},
    "export_workflow": {200: ("The `railyard/workflow` export document", WorkflowExport)},
    "resume_run": {409: "The run is not paused"},
    "rerun_run": {409: "The run has not ended (or succeeded, for `failed_step`)"},
    "replay_run": {409: "The run has not ended"},
    "start_test_run": {422: "The draft has compile errors (`diagnostics` lists them)"},
    "unpin_data": {404: "The node has no pinned data"},
    "unpin_data_by_post": {404: "The node has no pinned data"},
    "fetch_trigger_sample": {
        400: _REASONS[400],
        409: "The workflow is archived",
        502: "The trigger's code or the app it calls failed: `detail` says why, "
        "`extra.kind` is the connector's error kind",
        504: "The trigger did not answer within 30 s",
    },
    "create_credential": {503: "No encryption key is configured"},
    "update_credential": {503: "No encryption key is configured"},
    "connect_credential": {409: "The credential is not an OAuth2 credential"},
    "health_ready": {503: "PostgreSQL or Redis is down (the body says which)"},
    "create_group": {409: "A group with this name exists"},
    "create_project": {409: "A project with this name exists"},
    "create_service_account": {409: "A service account with this name exists"},
    "create_user": {409: "An account with this email exists"},
    "deactivate_user": {409: "The last active admin, or your own account"},
    "update_user": {409: "The last active admin cannot lose the admin role"},
    "move_to_project": {404: "The workflow, credential or project does not exist"},
    "create_project_subscription": {404: "The project does not exist"},
    "login": {401: "Wrong email or password", 429: "Too many failed sign-ins: locked for a while"},
}
"""Statuses a handler decides itself, by ``operation_id`` (derived ones are added too):
a description, or ``(description, body type)`` for a body other than
:class:`~backend.problems.Problem`."""

EVENT_STREAM = "text/event-stream"
"""The media type of Server-Sent Events (WHATWG HTML, "Server-sent events")."""

EVENT_STREAMS: dict[str, tuple[str, Any]] = {
    "stream_run_events": (
        "The run event stream: an `update` event (`RunUpdateEvent`) with the run now and "
        "after every change; the stream closes after the update showing the run ended",
        RunStreamEvent,
    ),
}
"""Operations answering Server-Sent Events, by ``operation_id``: the description of the
stream and the type of one event (a union of the event types it sends). The document
declares the answer ``text/event-stream`` with the event's schema as the media type's
``x-itemSchema`` (:class:`ItemSchemaJsonRenderPlugin`)."""

_STATUS_OVERRIDES: dict[str, int] = {
    "login": 200,
    "connect_credential": 302,
    "oauth2_callback": 302,
}
"""Success status of handlers that build their own ``Response`` (default differs)."""

OPTIONAL_BODIES = "openapi_optional_bodies"
"""Key of ``app.state``: operation ids whose request body may be left out."""

_WEBHOOK_ACCEPTED = 202
"""Success status of the webhook operations: the run was accepted."""


def _is_webhook(operation_id: str) -> bool:
    return operation_id.startswith(("receive_webhook_", "test_webhook_"))


def derived_statuses(handler: HTTPRouteHandler, path: str, method: str) -> dict[int, str]:
    """The error statuses that follow from how the route is built (see the module doc)."""
    statuses: dict[int, str] = {}
    if path.startswith("/api/") or _validates(handler, path):
        # unknown query parameters are refused on every /api operation
        statuses[400] = _REASONS[400]
    guarded = _guarded(handler)
    if guarded:
        statuses[401] = _REASONS[401]
    if guarded or (method in _UNSAFE and not path.startswith(_CSRF_EXEMPT)):
        statuses[403] = _REASONS[403]
    if "{" in path:
        statuses[404] = _REASONS[404]
    if path.startswith("/api/") and "data" in handler.parsed_fn_signature.parameters:
        statuses[415] = _REASONS[415]
    if guarded or not path.startswith("/health"):
        statuses[503] = _REASONS[503]
    return statuses


def _validates(handler: HTTPRouteHandler, path: str) -> bool:
    """True when Litestar validates parameters or a body of ``handler`` (and would
    document its own 400 for it): as Litestar decides it, a path parameter, a declared
    query, header or cookie parameter, or a body."""
    names = set(handler.parsed_fn_signature.parameters) - {"request", "self"}
    return "{" in path or bool(names - set(handler.resolve_dependencies()))


def _operation_id(handler: HTTPRouteHandler, route: HTTPRoute, method: str) -> str:
    creator = handler.operation_id
    if isinstance(creator, str):
        return creator
    if callable(creator):
        return str(creator(handler, method, route.path_components))  # type: ignore[arg-type]
    return ""


def document_responses(app: Litestar) -> None:
    """Document every status of every operation of ``app`` and its security schemes.

    Call once after building the app, before the document is first served (Litestar builds
    it on first use).
    """
    optional: set[str] = set()
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            if not handler.resolve_include_in_schema():
                continue
            _document(handler, route)
            data = handler.parsed_fn_signature.parameters.get("data")
            if data is not None and data.has_default:
                optional.update(_operation_id(handler, route, m) for m in handler.http_methods)
    app.state[OPTIONAL_BODIES] = frozenset(optional)


def _document(handler: HTTPRouteHandler, route: HTTPRoute) -> None:
    statuses: dict[int | str, str | tuple[str, Any]] = {}
    webhook = test_call = False
    for method in sorted(handler.http_methods):
        operation_id = _operation_id(handler, route, method)
        if operation_id.startswith("test_webhook_"):
            test_call = True
            statuses.update(_TEST_WEBHOOK)
        elif _is_webhook(operation_id):
            webhook = True
            statuses.update(_WEBHOOK)
            statuses[_WEBHOOK_ACCEPTED] = _WEBHOOK_ACCEPTED_ANSWER
        else:
            for code, reason in derived_statuses(handler, route.path, method).items():
                statuses[code] = reason
        for code, given in ANSWERS.get(operation_id, {}).items():
            statuses[code] = given
        if operation_id in _STATUS_OVERRIDES:
            handler.status_code = _STATUS_OVERRIDES[operation_id]
    if webhook:
        handler.status_code = _WEBHOOK_ACCEPTED
    elif test_call:
        handler.status_code = 200
    responses: dict[Any, ResponseSpec] = dict(handler.responses or {})
    for status, answer in statuses.items():
        if status in responses or (status == handler.status_code and not isinstance(answer, tuple)):
            continue
        description, body = answer if isinstance(answer, tuple) else (answer, Problem)
        free_form = webhook and status in (200, "default")
        responses[status] = ResponseSpec(
            data_container=cast(Any, None if free_form else body),
            description=description,
            generate_examples=False,
            media_type="*/*" if free_form else _media_type(body),
        )
    stream = EVENT_STREAMS.get(_operation_id(handler, route, "GET"))
    if stream is not None:
        responses[handler.status_code] = ResponseSpec(
            data_container=stream[1],
            description=stream[0],
            generate_examples=False,
            media_type=EVENT_STREAM,
        )
    if handler.status_code == 201 and _operation_id(handler, route, "POST") in LOCATIONS:
        handler.response_headers = [
            *(handler.response_headers or []),
            ResponseHeader(
                name="Location",
                description="The absolute URL of what was created",
                documentation_only=True,
                required=True,
                # documented only: the value gives the header its schema (a string), which
                # OpenAPI 3.1 requires of every header (CreatedLocation sets the real one)
                value="https://railyard.example/api/v1/...",
            ),
        ]
    if _lists(handler):
        handler.response_headers = [
            *(handler.response_headers or []),
            ResponseHeader(
                name="Link",
                description='`<next>; rel="next"` (RFC 8288): the URL of the next page, the '
                "same as `next`; only while there is more",
                documentation_only=True,
                required=False,
                value='<https://railyard.example/api/v1/...&cursor=...>; rel="next"',
            ),
        ]
    if handler.status_code == 204:  # (Litestar would document a JSON body)
        responses[204] = ResponseSpec(data_container=None, description="No content")
    handler.responses = responses
    if _guarded(handler):
        handler.security = SECURITY


def _lists(handler: HTTPRouteHandler) -> bool:
    """True when ``handler`` answers a list envelope (:class:`ListPage`)."""
    answer = handler.parsed_fn_signature.return_type.annotation
    return isinstance(answer, type) and issubclass(answer, ListPage)


def _media_type(body: Any) -> str:
    """Errors are ``application/problem+json``; other documented bodies plain JSON."""
    return problems.MEDIA_TYPE if body is Problem else "application/json"


def _guarded(handler: HTTPRouteHandler) -> bool:
    """True when the route needs a login or token: its declared permission is not public."""
    return declared_permission(handler) not in (None, Permission.PUBLIC)


class StrictStructSchemaPlugin(StructSchemaPlugin):
    """Documents ``forbid_unknown_fields`` msgspec Structs with ``additionalProperties:
    false``, as msgspec validates them (Litestar's own plugin leaves it out). Litestar
    has no public hook for Struct schemas: a pinned, tested seam
    (tests/unit/test_private_seams.py)."""

    def to_openapi_schema(self, field_definition: FieldDefinition, schema_creator: Any) -> Schema:
        schema = super().to_openapi_schema(field_definition, schema_creator)
        config = getattr(field_definition.type_, "__struct_config__", None)
        if isinstance(config, msgspec.structs.StructConfig) and config.forbid_unknown_fields:
            schema.additional_properties = False
        return schema


class ItemSchemaJsonRenderPlugin(JsonRenderPlugin):
    """The JSON document, finished where Litestar cannot say it:

    - the request body of an operation whose handler gives its body a default (``data:
      PublishIn | None = None``) is documented as optional: Litestar marks every JSON body
      required, though such an operation accepts a request without one;
    - a ``text/event-stream`` answer (:data:`EVENT_STREAMS`) has no ``schema`` (OpenAPI
      3.1 tools read it as the schema of one event with ``data`` a string, generators as
      the body: neither fits), and the schema of one event, a ``$ref`` to a named
      component (or a ``oneOf`` of them) whose ``data`` is the decoded JSON, is its
      ``x-itemSchema``: the ``itemSchema`` keyword OpenAPI 3.2 gives sequential media
      types, under an extension name while the document is OpenAPI 3.1. Generators thus
      leave the stream's body untyped and still make a model of every event type.
    """

    def render(self, request: Any, openapi_schema: dict[str, Any]) -> bytes:
        """The document (JSON bytes), finished as the class doc says."""
        optional = set(request.app.state.get(OPTIONAL_BODIES, ()))
        for item in openapi_schema.get("paths", {}).values():
            for operation in item.values():
                if not isinstance(operation, dict):
                    continue
                body = operation.get("requestBody")
                if body is not None and operation.get("operationId") in optional:
                    body["required"] = False
                for answer in (operation.get("responses") or {}).values():
                    media = (answer.get("content") or {}).get(EVENT_STREAM)
                    if media is not None and "schema" in media:
                        media["x-itemSchema"] = media.pop("schema")
        return super().render(request, openapi_schema)


class SelfContainedSwaggerRenderPlugin(SwaggerRenderPlugin):
    """Swagger UI from the vendored assets, with no inline script or style, so the page
    works under the app's Content-Security-Policy (``script-src 'self'``, docs/security.md).

    Litestar's own page starts Swagger UI from an inline ``<script>`` holding the whole
    document; this one loads ``/static/js/api-docs.js``, which reads the document from
    ``/schema/openapi.json`` and sends the CSRF cookie's value as ``X-CSRFToken`` on the
    requests a user tries out with the session cookie.
    """

    def render(self, request: Any, openapi_schema: dict[str, Any]) -> bytes:
        """The HTML page (bytes, UTF-8): vendored CSS and scripts, then the start script."""
        title = str(openapi_schema.get("info", {}).get("title", "API"))
        return f"""<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>{title} API</title>
  {self.favicon}
  <link href="{self.css_url}" rel="stylesheet">
  <script src="{self.js_url}" defer></script>
  <script src="{self.standalone_preset_js_url}" defer></script>
  <script src="/static/js/api-docs.js" defer></script>
</head>
<body><div id="swagger-container" data-spec-url="/schema/openapi.json"></div></body>
</html>
""".encode()


def openapi_config(version: str, router: Router) -> OpenAPIConfig:
    """The OpenAPI configuration: document at ``/schema/openapi.json``, Swagger UI at
    ``/schema`` (vendored assets), bearer and cookie security schemes. ``router`` serves
    them (its path ``/schema``; it carries the route options the app's guard reads)."""
    return OpenAPIConfig(
        title="Railyard",
        version=version,
        openapi_router=router,
        description=(
            "Workflows, runs, credentials, webhooks and API tokens. Authenticate with an API "
            "token (`Authorization: Bearer <token>`, created under `/api/v1/tokens`) or the "
            "login session cookie (unsafe methods then need the `X-CSRFToken` header)."
        ),
        components=Components(
            security_schemes={
                "bearer": SecurityScheme(
                    type="http",
                    scheme="bearer",
                    description="An API token: `Authorization: Bearer <token>`",
                ),
                "session": SecurityScheme(
                    type="apiKey",
                    name="railyard_session",
                    security_scheme_in="cookie",
                    description="The session cookie set by `POST /api/v1/auth/login`",
                ),
            }
        ),
        render_plugins=[
            SelfContainedSwaggerRenderPlugin(
                path="/",
                js_url=f"{SWAGGER_UI}/swagger-ui-bundle.js",
                css_url=f"{SWAGGER_UI}/swagger-ui.css",
                standalone_preset_js_url=f"{SWAGGER_UI}/swagger-ui-standalone-preset.js",
                favicon=f"<link rel='icon' type='image/png' href='{SWAGGER_UI}/favicon-32x32.png'>",
            ),
            ItemSchemaJsonRenderPlugin(),
        ],
    )
