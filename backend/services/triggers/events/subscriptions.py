"""Subscriptions follow the active version: activated, replaced, archived, restored.

:func:`sync_subscription` runs in the transaction that makes a version active (publish,
re-activation, restore), :func:`disable_subscription` in the one that archives the
workflow. Neither calls the vendor: an app webhook's ``register`` / ``unregister`` hooks
run in the lifecycle loop (:mod:`backend.services.triggers.events.lifecycle`), which retries them
and shows failures on the workflow page, so a slow or failing vendor never blocks a
publish.

Polling triggers get two settings the product adds to every polling trigger's config
(:data:`~backend.services.connectors.catalog.POLL_INTERVAL`,
:data:`~backend.services.connectors.catalog.INCLUDE_EXISTING`, declared with the node types'
config schemas); the interval is held to the trigger's
floor (``min_interval``).
"""

from __future__ import annotations

import secrets
import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import TriggerRetirement, TriggerSubscription
from backend.services.connectors.catalog import INCLUDE_EXISTING, POLL_INTERVAL
from backend.services.triggers.events.kinds import EVENT_KINDS

PRODUCT_KEYS = (POLL_INTERVAL, INCLUDE_EXISTING)


def trigger_step(graph: dict[str, Any]) -> tuple[str | None, str | None, dict[str, Any]]:
    """``(node type, step id, config)`` of a compiled graph's trigger step."""
    for step in graph.get("steps", []):
        if step.get("id") == graph.get("trigger"):
            return step.get("type"), step.get("id"), dict(step.get("config") or {})
    return None, None, {}


def connector_config(config: dict[str, Any]) -> dict[str, Any]:
    """The config the connector's code sees: without the product's own keys."""
    return {k: v for k, v in config.items() if k not in PRODUCT_KEYS}


def poll_interval(definition: Any, config: dict[str, Any]) -> float:
    """Seconds between polls: the config's :data:`POLL_INTERVAL` (else the trigger's
    ``interval``), never below the trigger's ``min_interval``."""
    chosen = config.get(POLL_INTERVAL)
    try:
        seconds = float(chosen) if chosen not in (None, "") else float(definition.interval)
    except (TypeError, ValueError):
        seconds = float(definition.interval)
    return max(seconds, float(definition.min_interval))


async def _row(session: AsyncSession, workflow_id: uuid.UUID) -> TriggerSubscription | None:
    return (
        await session.execute(
            select(TriggerSubscription)
            .where(TriggerSubscription.workflow_id == workflow_id)
            .with_for_update()
        )
    ).scalar_one_or_none()


def _retire(session: AsyncSession, row: TriggerSubscription, now: datetime) -> None:
    """Queue the row's registration for deletion at the vendor, with the config it was
    registered with."""
    if row.registration is not None:
        session.add(
            TriggerRetirement(
                workflow_id=row.workflow_id,
                node_type=row.node_type,
                config=row.config,
                version_number=row.version_number,
                registration=row.registration,
                attempts=0,
                next_attempt_at=now,
            )
        )
    row.registration = None
    row.registration_status = "none"


async def sync_subscription(
    session: AsyncSession,
    workflow_id: uuid.UUID,
    version_number: int,
    graph: dict[str, Any],
    now: datetime,
    triggers: dict[str, Any],
) -> TriggerSubscription | None:
    """Make the workflow's subscription follow ``graph`` (now active).

    ``triggers`` maps node types to SDK trigger definitions (the catalog's). A graph
    whose trigger is not of an event kind disables the row (and retires its hook). A
    changed node type or config is a new revision: a polling trigger starts again from
    now (a new baseline unless :data:`INCLUDE_EXISTING`), an app webhook registers again
    (the old hook is retired). An unchanged trigger keeps its cursor, registration and
    lease; only the version number moves.
    """
    node_type, step_id, config = trigger_step(graph)
    definition = triggers.get(node_type or "")
    kind = getattr(definition, "kind", None)
    row = await _row(session, workflow_id)
    if definition is None or kind not in EVENT_KINDS or step_id is None or node_type is None:
        if row is not None:
            await _disable(session, row, now)
        return row
    if row is None:
        row = TriggerSubscription(
            workflow_id=workflow_id,
            token=secrets.token_urlsafe(24),
            revision=0,
            failures=0,
            registration_status="none",
        )
        session.add(row)
    elif row.enabled and row.node_type == node_type and row.config == config:
        row.version_number = version_number
        row.step_id = step_id
        return row
    else:
        _retire(session, row, now)
    row.version_number = version_number
    row.step_id = step_id
    row.node_type = node_type
    row.kind = str(kind)
    row.config = config
    row.revision = (row.revision or 0) + 1
    row.enabled = True
    row.failures = 0
    row.last_error = None
    row.last_error_at = None
    row.lease_owner = None
    row.lease_until = None
    row.include_existing = bool(config.get(INCLUDE_EXISTING, False))
    if kind == "polling":
        row.interval_seconds = poll_interval(definition, config)
        row.cursor = None
        row.baseline_taken = False
        row.next_poll_at = now
    else:
        row.interval_seconds = 0.0
        row.next_poll_at = None
    if kind == "app_webhook" and getattr(definition, "register", None) is not None:
        row.registration_status = "pending"
        row.next_check_at = now
    else:
        row.next_check_at = None
    await session.flush()
    return row


async def disable_subscription(
    session: AsyncSession, workflow_id: uuid.UUID, now: datetime
) -> None:
    """Stop the workflow's subscription (its workflow was archived): no poll, delivery or
    listener after this commits, and its hook is retired at the vendor."""
    row = await _row(session, workflow_id)
    if row is not None:
        await _disable(session, row, now)


async def _disable(session: AsyncSession, row: TriggerSubscription, now: datetime) -> None:
    if not row.enabled and row.registration is None:
        return
    _retire(session, row, now)
    row.enabled = False
    row.revision = (row.revision or 0) + 1
    row.next_poll_at = None
    row.next_check_at = None
    row.lease_owner = None
    row.lease_until = None
    await session.flush()


def backoff(failures: int, base: float = 5.0, cap: float = 3600.0, floor: float = 0.0) -> timedelta:
    """Delay before the next try after ``failures`` failures in a row: ``base`` doubling
    per failure up to ``cap`` seconds (exponential backoff, as AWS's "Exponential Backoff
    And Jitter" describes; the jitter is the caller's), never below ``floor`` seconds (a
    polling trigger's ``min_interval``: a failing poll is not retried more often than a
    working one may poll)."""
    return timedelta(seconds=max(floor, min(cap, base * 2 ** max(0, failures - 1))))
