"""Server-rendered pages (Jinja2 + htmx) and the designer's HTML fragments.

Pages render through ``backend.services`` only; they never import the JSON API or workers.
A request without a login session is redirected to ``/login?next=<path>``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode, urlparse

import msgspec
from litestar import Controller, MediaType, Request, Response, get, post
from litestar.datastructures import State
from litestar.di import Provide
from litestar.exceptions import HTTPException
from litestar.params import FromPath, FromQuery, JSONBody, URLEncodedBody
from litestar.response import Redirect, ServerSentEvent

from backend.auth.policy import Level, Permission
from backend.runtime import Runtime
from backend.services.connectors import credentials as creds
from backend.services.errors import InvalidInput
from backend.services.identity import access, grants, login_sessions
from backend.services.runs import run_children, runs
from backend.services.triggers import webhook_urls
from backend.services.triggers.events import status as event_status
from backend.services.workflows import workflow_picker, workflows
from backend.services.workflows.records import WorkflowRecord
from backend.web.authentication import (
    SESSION_COOKIE,
    AppRuntime,
    DbSession,
    load_user,
    password_sign_in,
    provide_db,
    provide_runtime,
    session_cookie,
    session_token,
    throttled_message,
)
from backend.web.guards import CurrentPrincipal
from backend.web.run_events import run_event_stream
from frontend.diagram_catalog import catalog_json_for
from frontend.field_views import WORKFLOW_PICKER_KEY
from frontend.forms import CREDENTIAL_SCHEMA_KEY, CredentialChoice, render_config_panel
from frontend.rendering import (
    ENV,
    LoginRequiredPages,
    login_page,
    render,
    safe_next,
)
from frontend.webhook_view import active_webhook


class ConfigPanelIn(msgspec.Struct):
    """Body of POST /designer/config-panel."""

    node_type: str
    node_id: str
    label: str = ""
    config: dict[str, Any] = msgspec.field(default_factory=dict)
    return_to: str = ""  # the designer's path, for "New credential" links to come back to


def webhook_url(runtime: Runtime, wf: WorkflowRecord) -> str:
    """Public URL of ``wf``'s webhook."""
    return webhook_urls.webhook_url(runtime.settings.base_url, wf.webhook_token)


class AuthPages(Controller):
    """Login and logout pages."""

    path = "/"
    include_in_schema = False
    dependencies = {
        "db": Provide(provide_db),
        "runtime": Provide(provide_runtime, sync_to_thread=False),
    }

    @get("/", operation_id="page_home", opt={"permission": Permission.PUBLIC})
    async def home(self) -> Redirect:
        """Start page: the workflow list."""
        return Redirect("/workflows")

    @get("/login", operation_id="page_login", opt={"permission": Permission.PUBLIC})
    async def login_form(
        self, request: Request, runtime: AppRuntime, next: FromQuery[str | None] = None
    ) -> Response[str]:
        """The login form (with a "Sign in with <provider>" button when SSO is set up)."""
        await load_user(request)
        return login_page(request, runtime, next=safe_next(next))

    @post("/login", operation_id="page_login_submit", opt={"permission": Permission.PUBLIC})
    async def login(
        self,
        request: Request,
        db: DbSession,
        runtime: AppRuntime,
        data: URLEncodedBody[dict[str, str]],
    ) -> Response[Any]:
        """Check the form's credentials; on success set the session cookie and redirect.

        Wrong credentials answer 401 with one message whatever was wrong; a locked account
        or address answers 429 with ``Retry-After``.
        """
        target = safe_next(data.get("next"))
        outcome, token = await password_sign_in(
            db, request, data.get("email", ""), data.get("password", "")
        )
        if outcome.user is None or token is None:
            request.scope.setdefault("state", {})["user"] = None
            if outcome.lock is not None:
                message, seconds = throttled_message(outcome.lock)
                page = login_page(request, runtime, next=target, error=message, status_code=429)
                page.headers["Retry-After"] = str(seconds)
                return page
            return login_page(
                request, runtime, next=target, error="Wrong email or password.", status_code=401
            )
        response: Response[Any] = Redirect(target)
        response.set_cookie(session_cookie(runtime, token))
        return response

    @post("/logout", operation_id="page_logout", opt={"permission": Permission.PUBLIC})
    async def logout(self, request: Request, db: DbSession) -> Response[Any]:
        """End the session and go to the login page."""
        token = session_token(request)
        response: Response[Any] = Redirect("/login")
        if token:  # a token request has no session to end (its cookies are not its own)
            await login_sessions.close(db, token)
            response.delete_cookie(SESSION_COOKIE)
        return response


class AppPages(LoginRequiredPages):
    """Designer, run list and run detail (login required; the workflow list is in
    :mod:`frontend.workflow_pages`)."""

    @get(
        "/workflows/{workflow_id:uuid}/designer",
        operation_id="page_designer",
        opt={"permission": Permission.WORKFLOW_READ},
    )
    async def designer(
        self,
        request: Request,
        workflow_id: FromPath[uuid.UUID],
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
    ) -> Response[str]:
        """The visual editor for one workflow's draft (read only without ``edit``; Run
        only with ``run``)."""
        try:
            wf = await workflows.get_workflow(db, workflow_id)
        except workflows.WorkflowNotFound as exc:
            return render(
                request, "error.html", status_code=404, status_code_=404, message=str(exc)
            )
        level = await access.workflow_level(db, principal, wf)
        archived = wf.archived_at is not None  # read only until restored
        can_edit = level >= Level.EDIT and not archived
        # a reader is told whom to ask for edit access
        owner = None if can_edit else (await grants.object_summary(db, "workflow", wf.id)).owner
        return render(
            request,
            "designer.html",
            can_edit=can_edit,
            can_run=level >= Level.RUN and not archived,
            can_manage=level >= Level.MANAGE,
            workflow={
                "id": str(wf.id),
                "name": wf.name,
                "owner": owner,
                "archived": archived,
                "active_version": wf.active_version,
                "draft_revision": wf.draft_revision,
                "webhook": await active_webhook(db, runtime.settings.base_url, wf),
                "event_trigger": await event_status.trigger_status(
                    db, wf.id, runtime.settings.base_url, datetime.now(UTC)
                ),
            },
            diagram_json=msgspec.json.encode(wf.draft).decode(),
            catalog_json=msgspec.json.encode(runtime.catalog.all()).decode(),
            connectors_json=msgspec.json.encode(
                [
                    {"name": c.name, "label": c.label, "icon": c.icon, "version": c.version}
                    for c in runtime.catalog.connectors
                ]
            ).decode(),
        )

    @post(
        "/designer/config-panel",
        operation_id="fragment_config_panel",
        opt={"permission": Permission.AUTHENTICATED},
    )
    async def config_panel(
        self,
        request: Request,
        data: JSONBody[ConfigPanelIn],
        runtime: AppRuntime,
        db: DbSession,
        principal: CurrentPrincipal,
    ) -> Response[str]:
        """The config side panel of one node, rendered from its node type's schema.

        Credential fields (``"x-credential-type"``) become pickers of the saved
        credentials of their types that the user may use (masked views only).
        """
        spec = runtime.catalog.get(data.node_type)
        if spec is None:
            raise HTTPException(status_code=400, detail=f"unknown node type {data.node_type}")
        types = _credential_types(spec.config_schema)
        usable = await access.credential_filter(db, principal)
        views = await creds.list_credentials(db, runtime.catalog, types, usable) if types else []
        named = [v for k, v in data.config.items() if _is_picker(spec.config_schema, k)]
        names = await workflow_picker.readable_names(db, principal, named) if named else {}
        trigger = runtime.catalog.triggers.get(spec.type)
        html = render_config_panel(
            ENV,
            spec,
            data.node_id,
            data.label,
            data.config,
            [],
            credentials=[_credential_choice(v) for v in views],
            credential_type_labels={
                name: ctype.label for name, ctype in runtime.catalog.credential_types.items()
            },
            return_to=urlparse(data.return_to).path if data.return_to.startswith("/") else "",
            workflow_names=names,
            trigger_kind=str(getattr(trigger, "kind", "") or ""),
            trigger_example=getattr(trigger, "output_example", None) is not None,
        )
        return Response(html, media_type=MediaType.HTML)

    @get("/runs", operation_id="page_runs", opt={"permission": Permission.WORKFLOW_LIST})
    async def runs_page(
        self,
        request: Request,
        db: DbSession,
        principal: CurrentPrincipal,
        workflow_id: FromQuery[uuid.UUID | None] = None,
        status: FromQuery[str | None] = None,
    ) -> Response[str]:
        """Newest runs of the workflows the user may read, filterable by workflow and
        status."""
        visible = await access.workflow_filter(db, principal)
        items = await runs.list_runs(
            db, workflow_id=workflow_id, status=status or None, visible=visible
        )
        return render(
            request,
            "runs.html",
            runs=items,
            workflow_id=str(workflow_id) if workflow_id else None,
            status=status,
        )

    @get("/runs/{run_id:uuid}", operation_id="page_run", opt={"permission": Permission.RUN_READ})
    async def run_page(
        self,
        request: Request,
        run_id: FromPath[uuid.UUID],
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
        search: FromQuery[str | None] = None,
        children_of: FromQuery[str | None] = None,
        children_after: FromQuery[str | None] = None,
    ) -> Response[str]:
        """One run: the graph coloured by step status and every step's data; ``search``
        (the query it was found by) adds a link back to those results. A calling step
        lists a page of its child runs: the first, or with ``children_of`` (the step) and
        ``children_after`` (a cursor) the next one."""
        found = await runs.get_run_detail(db, run_id, runtime.settings.base_url)
        if found is None:
            return render(request, "error.html", status_code=404, message="run not found")
        detail, diagram = found
        try:
            more = await run_children.page_in_detail(db, detail, children_of, children_after)
        except InvalidInput as exc:
            return render(request, "error.html", status_code=400, message=str(exc))
        wf = await workflows.get_workflow(db, uuid.UUID(detail.workflow_id))
        level = await access.workflow_level(db, principal, wf)
        return render(
            request,
            "run_detail.html",
            can_control=level >= Level.RUN,
            results_url="/search?" + urlencode({"q": search}) if search else None,
            run=detail,
            children_more=more,
            request_children_of=children_of if children_after else None,
            trigger_event=await event_status.event_of_run(db, run_id),
            run_json=msgspec.json.encode(detail).decode(),
            diagram_json=msgspec.json.encode(diagram).decode(),
            catalog_json=catalog_json_for(runtime.catalog, diagram),
            type_labels={spec.type: spec.label for spec in runtime.catalog.all()},
        )

    @get(
        "/runs/{run_id:uuid}/events",
        operation_id="page_run_events",
        opt={"permission": Permission.RUN_READ},
    )
    async def run_events(self, run_id: FromPath[uuid.UUID], state: State) -> ServerSentEvent:
        """The run event stream (backend/web/run_events.py), for the run page."""
        runtime: Runtime = state.runtime
        return run_event_stream(runtime, run_id)


def _credential_types(schema: dict[str, Any]) -> tuple[str, ...]:
    """Every credential type a config schema's fields accept (``x-credential-type``)."""
    found: list[str] = []
    for prop in (schema.get("properties") or {}).values():
        accepted = prop.get(CREDENTIAL_SCHEMA_KEY) if isinstance(prop, dict) else None
        for name in [accepted] if isinstance(accepted, str) else list(accepted or ()):
            if name not in found:
                found.append(str(name))
    return tuple(found)


def _is_picker(schema: dict[str, Any], name: str) -> bool:
    """Whether config field ``name`` is a workflow picker (``x-workflow-picker``)."""
    prop = (schema.get("properties") or {}).get(name)
    return isinstance(prop, dict) and bool(prop.get(WORKFLOW_PICKER_KEY))


def _credential_choice(view: creds.CredentialView) -> CredentialChoice:
    """Name plus a masked hint (the masked secret fields, OAuth2 connection state)."""
    hints = [f"{k} {view.public[k]}" for k in view.secret_fields if view.public.get(k)]
    if view.kind == "oauth2":
        hints.append("connected" if view.connected else "not connected")
    return CredentialChoice(view.id, view.name, view.type, ", ".join(hints))


def wants_html(request: Request) -> bool:
    """True for browser page requests (not the API, webhooks, health checks or OpenAPI)."""
    path = request.url.path
    if path.startswith(("/api/", "/hooks/", "/health/", "/schema", "/static/")):
        return False
    return "text/html" in request.headers.get("accept", "")


def html_error(request: Request, status_code: int, message: str) -> Response[str]:
    """The styled error page (the user is looked up from the scope when already loaded)."""
    return render(
        request, "error.html", status_code=status_code, status_code_=status_code, message=message
    )
