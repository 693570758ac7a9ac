"""Create, change, delete, list and re-send event subscriptions (docs/api.md, "Event
subscriptions"). The routes check who may (``workflow:manage`` on the workflow for a
workflow's subscriptions; an admin for project-wide ones); every change is audited
(``event_subscription.create``, ``.update``, ``.delete``, ``.resend``; ``.disable`` by the
sender). The signing secret (``whsec_`` + base64 of 24 random bytes, the Standard Webhooks
format) is returned once, on creation, and stored encrypted.
"""

from __future__ import annotations

import base64
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend import crypto
from backend.db.models import (
    DeliveryAttempt,
    EventDelivery,
    EventSubscription,
    Project,
    Workflow,
)
from backend.services import audit
from backend.services.paging import Slice, page_query
from backend.services.subscriptions.catalogue import EVENT_TYPES
from backend.services.subscriptions.sending import (
    Outcome,
    delivery_client,
    post,
    record_attempt,
    retry_policy,
    secret_aad,
)
from backend.services.workflows.projects import ProjectNotFound
from backend.settings import Settings
from connectors.sdk import ActionError, NonRetryableError, SsrfPolicy

MAX_URL = 2000


class SubscriptionError(ValueError):
    """Invalid subscription input; ``field`` names the offending field (``url``,
    ``events``, ``project_id``)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class SubscriptionNotFound(LookupError):
    """No such subscription or delivery within the caller's scope."""


@dataclass(frozen=True)
class Scope:
    """What the caller reaches: one workflow's subscriptions (``workflow_id``), or every
    subscription (``workflow_id`` None: the admin routes)."""

    workflow_id: uuid.UUID | None


def new_secret() -> str:
    """A signing secret in the Standard Webhooks format: ``whsec_`` + base64 of 24
    random bytes (192 bits; the specification asks for 24 to 64 bytes)."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def fields(sub: EventSubscription) -> dict[str, Any]:
    """The audited, non-secret fields of ``sub``."""
    return {
        "url": sub.url,
        "events": list(sub.events),
        "description": sub.description,
        "enabled": sub.enabled,
        "workflow_id": str(sub.workflow_id) if sub.workflow_id else None,
        "project_id": str(sub.project_id) if sub.project_id else None,
    }


async def check_url(url: str, policy: SsrfPolicy) -> str:
    """``url`` when it is an absolute ``http``/``https`` URL whose host the SSRF policy
    lets through; raises :class:`SubscriptionError` (``field="url"``) otherwise. A host
    that does not resolve (yet) is accepted: sending checks every attempt again."""
    url = url.strip()
    try:
        parsed = httpx.URL(url)
    except Exception as exc:
        raise SubscriptionError(f"not a URL: {exc}", "url") from None
    if parsed.scheme not in ("http", "https") or not parsed.host or len(url) > MAX_URL:
        raise SubscriptionError(
            f"must be an absolute http or https URL of at most {MAX_URL} characters", "url"
        )
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        await policy.resolve_and_check(parsed.host, port)
    except NonRetryableError as exc:  # an address the policy refuses
        raise SubscriptionError(str(exc), "url") from None
    except ActionError:  # does not resolve now: every attempt checks again
        pass
    return url


def check_events(events: Sequence[str]) -> list[str]:
    """``events`` without repeats, in catalogue order; raises :class:`SubscriptionError`
    for an empty list or an unknown type."""
    unknown = [e for e in events if e not in EVENT_TYPES]
    if unknown or not events:
        raise SubscriptionError(
            f"name at least one event type of {', '.join(EVENT_TYPES)}"
            + (f"; unknown: {', '.join(unknown)}" if unknown else ""),
            "events",
        )
    return [e for e in EVENT_TYPES if e in events]


async def create(
    session: AsyncSession,
    scope: Scope,
    *,
    url: str,
    events: Sequence[str],
    description: str,
    project_id: uuid.UUID | None,
    created_by: uuid.UUID | None,
    policy: SsrfPolicy,
) -> tuple[EventSubscription, str]:
    """A new enabled subscription and its signing secret (shown this once). In a
    workflow's scope it is that workflow's; in the admin scope it covers ``project_id``'s
    workflows (every workflow when None). Raises :class:`SubscriptionError` for bad input,
    :class:`~backend.services.workflows.projects.ProjectNotFound` (404) for a project that is not
    there."""
    events = check_events(events)
    url = await check_url(url, policy)
    if scope.workflow_id is not None and project_id is not None:
        raise SubscriptionError("a workflow's subscription names no project", "project_id")
    if project_id is not None and await session.get(Project, project_id) is None:
        raise ProjectNotFound("no such project")
    secret = new_secret()
    sub = EventSubscription(
        id=uuid.uuid4(),
        workflow_id=scope.workflow_id,
        project_id=project_id,
        url=url,
        description=description.strip(),
        events=events,
        enabled=True,
        consecutive_failures=0,
        created_by=created_by,
    )
    sub.secret = crypto.encrypt(secret.encode(), aad=secret_aad(sub.id))
    session.add(sub)
    await session.flush()
    await session.refresh(sub)
    await audit.record(
        session, "event_subscription.create", "event_subscription", sub.id, after=fields(sub)
    )
    return sub, secret


async def listed(session: AsyncSession, scope: Scope) -> list[EventSubscription]:
    """The subscriptions in ``scope``, oldest first."""
    stmt = select(EventSubscription).order_by(EventSubscription.created_at, EventSubscription.id)
    if scope.workflow_id is not None:
        stmt = stmt.where(EventSubscription.workflow_id == scope.workflow_id)
    return list((await session.execute(stmt)).scalars())


async def get(session: AsyncSession, scope: Scope, subscription_id: uuid.UUID) -> EventSubscription:
    """The subscription, or :class:`SubscriptionNotFound` when it is not in ``scope``."""
    sub = await session.get(EventSubscription, subscription_id)
    if sub is None or (scope.workflow_id is not None and sub.workflow_id != scope.workflow_id):
        raise SubscriptionNotFound("no such event subscription")
    return sub


async def update(
    session: AsyncSession,
    scope: Scope,
    subscription_id: uuid.UUID,
    changes: dict[str, Any],
    policy: SsrfPolicy,
) -> EventSubscription:
    """Apply ``changes`` (any of ``url``, ``events``, ``description``, ``enabled``).
    Enabling a disabled subscription clears its failure count and notice; events written
    while it was disabled are not sent."""
    sub = await get(session, scope, subscription_id)
    before = fields(sub)
    if "url" in changes:
        sub.url = await check_url(changes["url"], policy)
    if "events" in changes:
        sub.events = check_events(changes["events"])
    if "description" in changes:
        sub.description = changes["description"].strip()
    if "enabled" in changes and bool(changes["enabled"]) != sub.enabled:
        sub.enabled = bool(changes["enabled"])
        sub.consecutive_failures, sub.retry_at = 0, None
        if sub.enabled:
            sub.disabled_at, sub.disabled_reason = None, None
            sub.events_since = datetime.now(UTC)  # none of the events of the pause
        else:
            sub.disabled_at, sub.disabled_reason = datetime.now(UTC), "disabled by a user"
    await session.flush()
    await audit.record(
        session,
        "event_subscription.update",
        "event_subscription",
        sub.id,
        before=before,
        after=fields(sub),
    )
    return sub


async def delete(session: AsyncSession, scope: Scope, subscription_id: uuid.UUID) -> None:
    """Delete the subscription with its deliveries and their log."""
    sub = await get(session, scope, subscription_id)
    await audit.record(
        session, "event_subscription.delete", "event_subscription", sub.id, before=fields(sub)
    )
    await session.delete(sub)


@dataclass
class DeliveryView:
    """A delivery with its attempts (newest first)."""

    delivery: EventDelivery
    attempts: list[DeliveryAttempt]


async def delivery_page(
    session: AsyncSession,
    scope: Scope,
    subscription_id: uuid.UUID,
    *,
    cursor: str | None,
    limit: int,
) -> Slice[DeliveryView]:
    """One page of the subscription's delivery log, newest first by ``(created_at, id)``,
    after the delivery ``cursor`` names, each delivery with its attempts: one keyset query
    of ``limit + 1`` rows (index ``ix_event_deliveries_subscription``) and one for the
    attempts. Raises :class:`SubscriptionNotFound`, :class:`~backend.services.paging.BadCursor`."""
    sub = await get(session, scope, subscription_id)
    page = await page_query(
        session,
        select(EventDelivery).where(EventDelivery.subscription_id == sub.id),
        (EventDelivery.created_at, EventDelivery.id),
        tuple[datetime, uuid.UUID],
        lambda row: (row[0].created_at, row[0].id),
        collection="deliveries",
        cursor=cursor,
        limit=limit,
    )
    views = await attempts_of(session, [row[0] for row in page.items])
    return Slice(views, page.next_cursor)


async def attempts_of(session: AsyncSession, rows: Sequence[EventDelivery]) -> list[DeliveryView]:
    """``rows`` each with its attempts, newest first."""
    attempts: dict[uuid.UUID, list[DeliveryAttempt]] = {r.id: [] for r in rows}
    if rows:
        found = await session.execute(
            select(DeliveryAttempt)
            .where(DeliveryAttempt.delivery_id.in_(list(attempts)))
            .order_by(DeliveryAttempt.id.desc())
        )
        for a in found.scalars():
            attempts[a.delivery_id].append(a)
    return [DeliveryView(r, attempts[r.id]) for r in rows]


async def resend(
    session: AsyncSession,
    scope: Scope,
    subscription_id: uuid.UUID,
    delivery_id: uuid.UUID,
    settings: Settings,
) -> Outcome:
    """Send one delivery again now (whatever its status; the same ``webhook-id`` and
    body, through the same guarded client as the sender), log the attempt as manual and
    audit the re-send."""
    sub = await get(session, scope, subscription_id)
    d = await session.get(EventDelivery, delivery_id)
    if d is None or d.subscription_id != sub.id:
        raise SubscriptionNotFound("no such delivery of this subscription")
    secret = crypto.decrypt(sub.secret, aad=secret_aad(sub.id)).decode()
    async with delivery_client(settings) as client:
        outcome = await post(client, sub.url, secret, d.id, d.body)
    policy = retry_policy(settings)
    await record_attempt(session, d.id, outcome, policy, datetime.now(UTC), manual=True)
    await audit.record(
        session,
        "event_subscription.resend",
        "event_subscription",
        sub.id,
        details={"delivery_id": str(d.id), "status_code": outcome.status_code},
    )
    return outcome


async def disabled_notices(session: AsyncSession, user_id: uuid.UUID) -> list[dict[str, Any]]:
    """The owner's notices: subscriptions ``user_id`` created that the sender disabled
    (``url``, ``reason``, ``at``, ``workflow_id``, ``workflow_name``), newest first."""
    found = await session.execute(
        select(EventSubscription, Workflow.name)
        .outerjoin(Workflow, Workflow.id == EventSubscription.workflow_id)
        .where(
            EventSubscription.created_by == user_id,
            EventSubscription.enabled.is_(False),
            EventSubscription.consecutive_failures > 0,
        )
        .order_by(EventSubscription.disabled_at.desc())
    )
    return [
        {
            "id": sub.id,
            "url": sub.url,
            "reason": sub.disabled_reason,
            "at": sub.disabled_at,
            "workflow_id": sub.workflow_id,
            "workflow_name": name,
        }
        for sub, name in found
    ]


async def pending_count(session: AsyncSession, subscription_id: uuid.UUID) -> int:
    """Deliveries of the subscription not yet acknowledged or given up."""
    count = await session.scalar(
        select(func.count())
        .select_from(EventDelivery)
        .where(EventDelivery.subscription_id == subscription_id, EventDelivery.status == "pending")
    )
    return int(count or 0)


async def rotate_secrets(session: AsyncSession, keyring: crypto.Keyring) -> int:
    """Re-encrypt every subscription's signing secret not under ``keyring``'s current key
    (rows locked); returns the count. Raises :class:`~backend.crypto.CryptoError` when a
    blob's key is not in the keyring (``railyard rotate-key`` runs it in the transaction
    of the credentials' rotation, so nothing changes then)."""
    rows = (await session.execute(select(EventSubscription).with_for_update())).scalars().all()
    count = 0
    for row in rows:
        if crypto.key_id_of(row.secret) != keyring.current_id:
            row.secret = keyring.reencrypt(row.secret, aad=secret_aad(row.id))
            count += 1
    await session.flush()
    return count
