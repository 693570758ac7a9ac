"""Event subscription pages of one workflow (``/workflows/{id}/subscriptions``, needs
``workflow:manage``): the subscriptions with a form to add one (its signing secret is
shown once, on the page the form answers), and per subscription its delivery log (the newest
100) with every attempt, a Re-send button per delivery (htmx: the row is replaced by the new
attempt), Enable/Disable and Delete (docs/api.md, "Event subscriptions")."""

from __future__ import annotations

import uuid
from typing import Any

from litestar import Request, Response, get, post
from litestar.di import Provide
from litestar.params import FromPath, URLEncodedBody
from litestar.response import Redirect

from backend.auth.policy import Permission
from backend.services.outbound import ssrf_policy
from backend.services.subscriptions import manage
from backend.services.subscriptions.catalogue import EVENT_TYPES
from backend.services.subscriptions.sending import message_id
from backend.services.workflows import workflows
from backend.web.authentication import AppRuntime, CurrentUser, DbSession, provide_user
from frontend.rendering import LoginRequiredPages, render

MANAGE = {"permission": Permission.WORKFLOW_MANAGE}
BASE = "/workflows/{workflow_id:uuid}/subscriptions"
ONE = BASE + "/{subscription_id:uuid}"


async def _list_page(
    request: Request[Any, Any, Any],
    db: DbSession,
    workflow_id: uuid.UUID,
    *,
    error: str | None = None,
    created: tuple[Any, str] | None = None,
    form: dict[str, Any] | None = None,
) -> Response[str]:
    wf = await workflows.get_workflow(db, workflow_id)
    subs = await manage.listed(db, manage.Scope(workflow_id))
    return render(
        request,
        "subscriptions.html",
        status_code=400 if error else (201 if created else 200),
        workflow={"id": str(wf.id), "name": wf.name},
        subscriptions=[
            {
                **manage.fields(s),
                "id": str(s.id),
                "sub": s,
                "pending": await manage.pending_count(db, s.id),
            }
            for s in subs
        ],
        event_types=EVENT_TYPES,
        error=error,
        created={"id": str(created[0].id), "secret": created[1]} if created else None,
        form=form or {"url": "", "events": list(EVENT_TYPES), "description": ""},
    )


class SubscriptionPages(LoginRequiredPages):
    """The pages in the module doc."""

    dependencies = {**LoginRequiredPages.dependencies, "user": Provide(provide_user)}

    @get(BASE, operation_id="page_workflow_subscriptions", opt=MANAGE)
    async def list_page(
        self, request: Request[Any, Any, Any], db: DbSession, workflow_id: FromPath[uuid.UUID]
    ) -> Response[str]:
        """The workflow's subscriptions and the form to add one."""
        return await _list_page(request, db, workflow_id)

    @post(BASE, operation_id="page_create_workflow_subscription", opt=MANAGE)
    async def create(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        runtime: AppRuntime,
        user: CurrentUser,
        workflow_id: FromPath[uuid.UUID],
        data: URLEncodedBody[dict[str, Any]],
    ) -> Response[str]:
        """Add a subscription from the form; the answer shows its secret once."""
        events = data.get("events", [])
        events = [events] if isinstance(events, str) else list(events)
        form = {
            "url": data.get("url", ""),
            "events": events,
            "description": data.get("description", ""),
        }
        try:
            created = await manage.create(
                db,
                manage.Scope(workflow_id),
                url=str(form["url"]),
                events=events,
                description=str(form["description"]),
                project_id=None,
                created_by=user.id,
                policy=ssrf_policy(runtime.settings),
            )
        except manage.SubscriptionError as exc:
            return await _list_page(
                request, db, workflow_id, error=f"{exc.field}: {exc}", form=form
            )
        return await _list_page(request, db, workflow_id, created=created)

    @get(ONE, operation_id="page_workflow_subscription", opt=MANAGE)
    async def detail(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        workflow_id: FromPath[uuid.UUID],
        subscription_id: FromPath[uuid.UUID],
    ) -> Response[str]:
        """One subscription: its state and its delivery log with every attempt."""
        scope = manage.Scope(workflow_id)
        try:
            sub = await manage.get(db, scope, subscription_id)
        except manage.SubscriptionNotFound as exc:
            return render(request, "error.html", status_code=404, message=str(exc))
        wf = await workflows.get_workflow(db, workflow_id)
        page = await manage.delivery_page(db, scope, subscription_id, cursor=None, limit=100)
        return render(
            request,
            "subscription_detail.html",
            workflow={"id": str(wf.id), "name": wf.name},
            sub=sub,
            deliveries=[
                {"d": v.delivery, "attempts": v.attempts, "webhook_id": message_id(v.delivery.id)}
                for v in page.items
            ],
            more_deliveries=page.has_more,
        )

    @post(
        ONE + "/deliveries/{delivery_id:uuid}/resend",
        operation_id="page_resend_delivery",
        opt=MANAGE,
    )
    async def resend(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        runtime: AppRuntime,
        workflow_id: FromPath[uuid.UUID],
        subscription_id: FromPath[uuid.UUID],
        delivery_id: FromPath[uuid.UUID],
    ) -> Response[Any]:
        """Send one delivery again now; back to the delivery log."""
        scope = manage.Scope(workflow_id)
        try:
            await manage.resend(db, scope, subscription_id, delivery_id, runtime.settings)
        except manage.SubscriptionNotFound as exc:
            return render(request, "error.html", status_code=404, message=str(exc))
        return Redirect(f"/workflows/{workflow_id}/subscriptions/{subscription_id}#d-{delivery_id}")

    @post(ONE + "/state", operation_id="page_subscription_state", opt=MANAGE)
    async def set_state(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        runtime: AppRuntime,
        workflow_id: FromPath[uuid.UUID],
        subscription_id: FromPath[uuid.UUID],
        data: URLEncodedBody[dict[str, str]],
    ) -> Response[Any]:
        """Enable (``enabled=true``) or disable the subscription."""
        scope = manage.Scope(workflow_id)
        enabled = data.get("enabled") == "true"
        policy = ssrf_policy(runtime.settings)
        try:
            await manage.update(db, scope, subscription_id, {"enabled": enabled}, policy)
        except manage.SubscriptionNotFound as exc:
            return render(request, "error.html", status_code=404, message=str(exc))
        return Redirect(f"/workflows/{workflow_id}/subscriptions/{subscription_id}")

    @post(ONE + "/delete", operation_id="page_delete_subscription", opt=MANAGE)
    async def remove(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        workflow_id: FromPath[uuid.UUID],
        subscription_id: FromPath[uuid.UUID],
    ) -> Response[Any]:
        """Delete the subscription and its log; back to the list."""
        try:
            await manage.delete(db, manage.Scope(workflow_id), subscription_id)
        except manage.SubscriptionNotFound as exc:
            return render(request, "error.html", status_code=404, message=str(exc))
        return Redirect(f"/workflows/{workflow_id}/subscriptions")
