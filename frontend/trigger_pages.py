"""Trigger pages and fragments: webhook deliveries, a connector trigger's status, the
schedule preview, API tokens.

Rendered through ``backend.services`` (never the JSON API). Login required.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec
from litestar import MediaType, Request, Response, get, post
from litestar.params import FromPath, JSONBody, URLEncodedBody
from litestar.response import Redirect

from backend.auth.policy import Permission, parse_role, scopes_for_role
from backend.services.identity import api_tokens
from backend.services.identity.identity import Identity
from backend.services.triggers import schedules, webhooks
from backend.services.triggers.events import status as event_status
from backend.services.workflows import workflows
from backend.triggers.schedule_rules import ScheduleError
from backend.web.authentication import AppRuntime, DbSession
from frontend.rendering import ENV, LoginRequiredPages, render
from frontend.token_forms import form_days, form_scopes


class SchedulePreviewIn(msgspec.Struct):
    """Body of POST /designer/schedule-preview: the schedule node's (draft) config."""

    config: dict[str, Any] = msgspec.field(default_factory=dict)


def _scopes(user: Identity) -> list[str]:
    return [s.value for s in scopes_for_role(parse_role(user.role))]


class TriggerPages(LoginRequiredPages):
    """Deliveries page, schedule preview fragment and the API tokens page."""

    @get(
        "/workflows/{workflow_id:uuid}/deliveries",
        operation_id="page_webhook_deliveries",
        opt={"permission": Permission.WORKFLOW_READ},
    )
    async def deliveries(
        self, request: Request[Any, Any, Any], workflow_id: FromPath[uuid.UUID], db: DbSession
    ) -> Response[str]:
        """Recent webhook deliveries of a workflow: runs started and requests rejected."""
        wf = await workflows.get_workflow(db, workflow_id)
        rows = await webhooks.list_deliveries(db, workflow_id)
        return render(
            request,
            "webhook_deliveries.html",
            workflow={"id": str(wf.id), "name": wf.name},
            deliveries=rows,
        )

    @get(
        "/workflows/{workflow_id:uuid}/trigger",
        operation_id="page_trigger_status",
        opt={"permission": Permission.WORKFLOW_READ},
    )
    async def trigger_status(
        self,
        request: Request[Any, Any, Any],
        workflow_id: FromPath[uuid.UUID],
        db: DbSession,
        runtime: AppRuntime,
    ) -> Response[str]:
        """The workflow's connector trigger: its URL or registration, last poll, next
        poll, last event and last error, recent events with their runs, dead letters."""
        try:
            wf = await workflows.get_workflow(db, workflow_id)
        except workflows.WorkflowNotFound as exc:
            return render(request, "error.html", status_code=404, message=str(exc))
        found = await event_status.trigger_status(
            db, workflow_id, runtime.settings.base_url, datetime.now(UTC)
        )
        spec = runtime.catalog.get(found.node_type) if found is not None else None
        return render(
            request,
            "trigger_status.html",
            workflow={"id": str(wf.id), "name": wf.name},
            trigger=found,
            trigger_label=spec.label if spec is not None else "",
        )

    @post(
        "/designer/schedule-preview",
        operation_id="fragment_schedule_preview",
        opt={"permission": Permission.AUTHENTICATED},
        status_code=200,
    )
    async def schedule_preview(self, data: JSONBody[SchedulePreviewIn]) -> Response[str]:
        """The next 10 fire times of a schedule config, in its zone and in UTC (HTML)."""
        try:
            rows = schedules.preview(data.config, datetime.now(UTC))
            error = None
        except ScheduleError as exc:
            rows, error = [], str(exc)
        html = ENV.get_template("fragments/schedule_preview.html").render(
            rows=rows, error=error, timezone=data.config.get("timezone") or "UTC"
        )
        return Response(html, media_type=MediaType.HTML)

    @get("/tokens", operation_id="page_api_tokens", opt={"permission": Permission.TOKENS_OWN})
    async def tokens(self, request: Request[Any, Any, Any], db: DbSession) -> Response[str]:
        """The user's API tokens."""
        user: Identity = request.scope["state"]["user"]
        return render(
            request,
            "api_tokens.html",
            tokens=await api_tokens.list_tokens(db, user.id),
            scopes=_scopes(user),
        )

    @post(
        "/tokens", operation_id="page_create_api_token", opt={"permission": Permission.TOKENS_OWN}
    )
    async def create_token(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        data: URLEncodedBody[dict[str, str]],
    ) -> Response[str]:
        """Create a token and show its text once."""
        user: Identity = request.scope["state"]["user"]
        try:
            _, token = await api_tokens.create_for(
                db,
                user,
                data.get("name", ""),
                form_scopes(data),
                form_days(data.get("expires_in_days", "")),
            )
            error = None
        except api_tokens.TokenError as exc:
            token, error = None, str(exc)
        return render(
            request,
            "api_tokens.html",
            status_code=201 if token else 400,
            tokens=await api_tokens.list_tokens(db, user.id),
            scopes=_scopes(user),
            new_token=token,
            error=error,
        )

    @post(
        "/tokens/{token_id:uuid}/revoke",
        operation_id="page_revoke_api_token",
        opt={"permission": Permission.TOKENS_OWN},
    )
    async def revoke_token(
        self, request: Request[Any, Any, Any], token_id: FromPath[uuid.UUID], db: DbSession
    ) -> Redirect:
        """Revoke a token and go back to the list."""
        user: Identity = request.scope["state"]["user"]
        await api_tokens.revoke_token(db, user.id, token_id)
        return Redirect("/tokens")
