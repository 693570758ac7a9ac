"""Outgoing event subscriptions (docs/api.md, "Event subscriptions").

- ``/api/v1/workflows/{workflow_id}/subscriptions``: one workflow's subscriptions, for
  whoever may manage the workflow (``workflow:manage``);
- ``/api/v1/admin/subscriptions``: project-wide subscriptions (a project's workflows, or
  every workflow) and every workflow's, for admins (``projects:manage``).

Each has: list, create (201 with the signing secret, shown once), read, change (PATCH),
delete (204), the delivery log (newest first, each with its attempts) and re-sending one
delivery now (200 with what the receiver answered). 400 names the field of bad input (a
URL the SSRF policy refuses is one), 404 an id not in reach.
"""

from __future__ import annotations

import uuid
from typing import Any

from litestar import Controller, Request, delete, get, patch, post
from litestar.params import FromPath, JSONBody

from backend.api.lists import DEFAULT_LIMIT, Cursor, Limit, listed, page_links
from backend.api.subscription_schemas import (
    DeliveryList,
    ProjectSubscriptionIn,
    ResendOut,
    SubscriptionCreated,
    SubscriptionIn,
    SubscriptionList,
    SubscriptionOut,
    SubscriptionPatch,
    changes,
    delivery_out,
    resend_out,
    subscription_out,
)
from backend.auth.policy import Permission
from backend.services.outbound import ssrf_policy
from backend.services.subscriptions import manage
from backend.services.subscriptions.manage import Scope
from backend.web.authentication import AppRuntime, CurrentUser, DbSession
from backend.web.guards import access_dependencies

ALL = Scope(None)


def subscription_page(
    request: Request[Any, Any, Any], subs: list[Any], cursor: str | None, limit: int
) -> SubscriptionList:
    """One page of ``subs`` in the list envelope, oldest first."""
    return listed(
        request,
        SubscriptionList,
        [subscription_out(s) for s in subs],
        lambda s: (s.created_at.isoformat(), str(s.id)),
        tuple[str, str],
        cursor=cursor,
        limit=limit,
    )


async def delivery_page(
    request: Request[Any, Any, Any],
    db: DbSession,
    scope: Scope,
    subscription_id: uuid.UUID,
    cursor: str | None,
    limit: int,
) -> DeliveryList:
    """One page of a subscription's deliveries in the list envelope, newest first."""
    page = await manage.delivery_page(db, scope, subscription_id, cursor=cursor, limit=limit)
    return DeliveryList(data=[delivery_out(v) for v in page.items], **page_links(request, page))


class WorkflowSubscriptionController(Controller):
    """One workflow's event subscriptions."""

    path = "/api/v1/workflows/{workflow_id:uuid}/subscriptions"
    tags = ["event subscriptions"]
    dependencies = access_dependencies()
    opt = {"permission": Permission.WORKFLOW_MANAGE}

    @get("/", operation_id="list_workflow_subscriptions", opt=opt)
    async def list_subscriptions(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        workflow_id: FromPath[uuid.UUID],
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> SubscriptionList:
        """The workflow's subscriptions, oldest first."""
        subs = await manage.listed(db, Scope(workflow_id))
        return subscription_page(request, subs, cursor, limit)

    @post("/", operation_id="create_workflow_subscription", opt=opt)
    async def create(
        self,
        db: DbSession,
        runtime: AppRuntime,
        user: CurrentUser,
        workflow_id: FromPath[uuid.UUID],
        data: JSONBody[SubscriptionIn],
    ) -> SubscriptionCreated:
        """Subscribe a URL to event types of the workflow (201, with the secret)."""
        sub, secret = await manage.create(
            db,
            Scope(workflow_id),
            url=data.url,
            events=data.events,
            description=data.description,
            project_id=None,
            created_by=user.id,
            policy=ssrf_policy(runtime.settings),
        )
        return subscription_out(sub, secret)  # type: ignore[return-value]

    @get("/{subscription_id:uuid}", operation_id="get_workflow_subscription", opt=opt)
    async def read(
        self, db: DbSession, workflow_id: FromPath[uuid.UUID], subscription_id: FromPath[uuid.UUID]
    ) -> SubscriptionOut:
        """One subscription."""
        return subscription_out(await manage.get(db, Scope(workflow_id), subscription_id))

    @patch("/{subscription_id:uuid}", operation_id="update_workflow_subscription", opt=opt)
    async def update(
        self,
        db: DbSession,
        runtime: AppRuntime,
        workflow_id: FromPath[uuid.UUID],
        subscription_id: FromPath[uuid.UUID],
        data: JSONBody[SubscriptionPatch],
    ) -> SubscriptionOut:
        """Change the URL, event types, description or whether it is enabled."""
        policy = ssrf_policy(runtime.settings)
        sub = await manage.update(db, Scope(workflow_id), subscription_id, changes(data), policy)
        return subscription_out(sub)

    @delete("/{subscription_id:uuid}", operation_id="delete_workflow_subscription", opt=opt)
    async def remove(
        self, db: DbSession, workflow_id: FromPath[uuid.UUID], subscription_id: FromPath[uuid.UUID]
    ) -> None:
        """Delete the subscription and its delivery log (204)."""
        await manage.delete(db, Scope(workflow_id), subscription_id)

    @get(
        "/{subscription_id:uuid}/deliveries",
        operation_id="list_workflow_subscription_deliveries",
        opt=opt,
    )
    async def deliveries(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        workflow_id: FromPath[uuid.UUID],
        subscription_id: FromPath[uuid.UUID],
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> DeliveryList:
        """The deliveries, newest first, with their attempts."""
        scope = Scope(workflow_id)
        return await delivery_page(request, db, scope, subscription_id, cursor, limit)

    @post(
        "/{subscription_id:uuid}/deliveries/{delivery_id:uuid}/resend",
        operation_id="resend_workflow_subscription_delivery",
        status_code=200,
        opt=opt,
    )
    async def resend(
        self,
        db: DbSession,
        runtime: AppRuntime,
        workflow_id: FromPath[uuid.UUID],
        subscription_id: FromPath[uuid.UUID],
        delivery_id: FromPath[uuid.UUID],
    ) -> ResendOut:
        """Send the delivery again now; the attempt is logged as manual."""
        outcome = await manage.resend(
            db, Scope(workflow_id), subscription_id, delivery_id, runtime.settings
        )
        return resend_out(outcome)


class AdminSubscriptionController(Controller):
    """Every event subscription; project-wide ones are made here."""

    path = "/api/v1/admin/subscriptions"
    tags = ["event subscriptions"]
    dependencies = access_dependencies()
    opt = {"permission": Permission.PROJECTS_MANAGE}

    @get("/", operation_id="list_subscriptions", opt=opt)
    async def list_subscriptions(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> SubscriptionList:
        """Every subscription, oldest first."""
        return subscription_page(request, await manage.listed(db, ALL), cursor, limit)

    @post("/", operation_id="create_project_subscription", opt=opt)
    async def create(
        self,
        db: DbSession,
        runtime: AppRuntime,
        user: CurrentUser,
        data: JSONBody[ProjectSubscriptionIn],
    ) -> SubscriptionCreated:
        """Subscribe a URL to events of a project's workflows (every workflow's without
        ``project_id``); 201 with the secret."""
        sub, secret = await manage.create(
            db,
            ALL,
            url=data.url,
            events=data.events,
            description=data.description,
            project_id=data.project_id,
            created_by=user.id,
            policy=ssrf_policy(runtime.settings),
        )
        return subscription_out(sub, secret)  # type: ignore[return-value]

    @get("/{subscription_id:uuid}", operation_id="get_subscription", opt=opt)
    async def read(self, db: DbSession, subscription_id: FromPath[uuid.UUID]) -> SubscriptionOut:
        """One subscription."""
        return subscription_out(await manage.get(db, ALL, subscription_id))

    @patch("/{subscription_id:uuid}", operation_id="update_subscription", opt=opt)
    async def update(
        self,
        db: DbSession,
        runtime: AppRuntime,
        subscription_id: FromPath[uuid.UUID],
        data: JSONBody[SubscriptionPatch],
    ) -> SubscriptionOut:
        """Change the URL, event types, description or whether it is enabled."""
        policy = ssrf_policy(runtime.settings)
        return subscription_out(
            await manage.update(db, ALL, subscription_id, changes(data), policy)
        )

    @delete("/{subscription_id:uuid}", operation_id="delete_subscription", opt=opt)
    async def remove(self, db: DbSession, subscription_id: FromPath[uuid.UUID]) -> None:
        """Delete the subscription and its delivery log (204)."""
        await manage.delete(db, ALL, subscription_id)

    @get(
        "/{subscription_id:uuid}/deliveries",
        operation_id="list_subscription_deliveries",
        opt=opt,
    )
    async def deliveries(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        subscription_id: FromPath[uuid.UUID],
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> DeliveryList:
        """The deliveries, newest first, with their attempts."""
        return await delivery_page(request, db, ALL, subscription_id, cursor, limit)

    @post(
        "/{subscription_id:uuid}/deliveries/{delivery_id:uuid}/resend",
        operation_id="resend_subscription_delivery",
        status_code=200,
        opt=opt,
    )
    async def resend(
        self,
        db: DbSession,
        runtime: AppRuntime,
        subscription_id: FromPath[uuid.UUID],
        delivery_id: FromPath[uuid.UUID],
    ) -> ResendOut:
        """Send the delivery again now; the attempt is logged as manual."""
        outcome = await manage.resend(db, ALL, subscription_id, delivery_id, runtime.settings)
        return resend_out(outcome)
