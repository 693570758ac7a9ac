"""The audit log: one append-only record per change and per execution request.

Every use case that changes something (workflows, versions, credentials, users, roles,
groups, grants, schedules, webhooks, tokens, settings) or starts, pauses, cancels or
re-runs a run calls :func:`record` in the same transaction as the change, so a change and
its audit row commit together or not at all.

Who and from where come from the request: the web layer opens a :class:`RequestContext`
per HTTP request (:func:`bind_request`) and fills in the actor once it has authenticated
the caller (:func:`bind_actor`); :func:`record` reads it. Outside a request (CLI, workers,
scheduler) the context is empty and callers pass ``actor_user_id``/``actor_label``.

Never pass secrets: ``before``/``after``/``details`` are shown to admins and exported.
"""

from __future__ import annotations

import dataclasses
import uuid
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import AuditLog
from backend.engine.ports import AuditEntry

__all__ = [
    "RequestContext",
    "bind_actor",
    "bind_request",
    "current_request",
    "end_request",
    "entry",
    "record",
    "recorded_within",
]


@dataclass
class RequestContext:
    """What the audit log needs to know about the HTTP request being served.

    ``address``: the client's IP address as the server saw it (``None`` when unknown);
    ``request_id``: the ``X-Request-ID`` echoed to the client (at most 64 characters);
    ``actor_user_id``/``actor_label``: the authenticated user (or token) once known.
    """

    address: str | None = None
    request_id: str | None = None
    actor_user_id: uuid.UUID | None = None
    actor_label: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


_CURRENT: ContextVar[RequestContext | None] = ContextVar("railyard_request", default=None)


def bind_request(address: str | None, request_id: str | None) -> RequestContext:
    """Start the context of a new request (called once per request by the web layer)."""
    context = RequestContext(address=address, request_id=request_id)
    _CURRENT.set(context)
    return context


def end_request() -> None:
    """Forget the request context (called by the web layer when a request is served, so
    work done later in the same task, e.g. in tests calling the app in-process, is not
    attributed to that request)."""
    _CURRENT.set(None)


def bind_actor(user_id: uuid.UUID | None, label: str | None) -> None:
    """Record who the current request acts as (no-op outside a request)."""
    context = _CURRENT.get()
    if context is not None:
        context.actor_user_id = user_id
        context.actor_label = label


def current_request() -> RequestContext | None:
    """The context of the request being served, or ``None`` outside a request."""
    return _CURRENT.get()


async def record(
    session: AsyncSession,
    action: str,
    object_type: str,
    object_id: str | uuid.UUID,
    **fields: Any,
) -> None:
    """Add an audit row to ``session`` (committed with the caller's transaction).

    ``action`` is ``<object>.<verb>`` (``workflow.publish``, ``run.cancel``,
    ``auth.login_failed``, ...); ``object_id`` the touched object's id (or the attempted
    login's email). ``before``/``after`` are JSON-able snapshots of the object's
    non-secret fields around a change (``None`` for creation/deletion respectively).
    The actor defaults to the current request's authenticated user; address and request
    id always come from the current request. ``fields``: :func:`entry`'s keywords
    (``actor_user_id``, ``actor_label``, ``before``, ``after``, ``details``).
    """
    row = entry(action, object_type, object_id, **fields)
    session.add(AuditLog(**dataclasses.asdict(row)))


def entry(
    action: str,
    object_type: str,
    object_id: str | uuid.UUID,
    *,
    actor_user_id: uuid.UUID | None = None,
    actor_label: str | None = None,
    before: Any = None,
    after: Any = None,
    details: dict[str, Any] | None = None,
) -> AuditEntry:
    """The audit row :func:`record` adds, as a value (no I/O): what a run request hands
    the run writer to add in the transaction of its change. Same rules as :func:`record`
    (the actor defaults to the current request's; address and request id from it)."""
    context = _CURRENT.get()
    if context is not None and actor_user_id in (None, context.actor_user_id):
        actor_user_id = context.actor_user_id
        actor_label = actor_label or context.actor_label
    return AuditEntry(
        action=action,
        object_type=object_type,
        object_id=str(object_id),
        actor_user_id=actor_user_id,
        actor_label=actor_label,
        address=context.address if context else None,
        request_id=context.request_id if context else None,
        before=before,
        after=after,
        details=details or {},
    )


async def recorded_within(
    session: AsyncSession,
    action: str,
    object_type: str,
    object_id: str | uuid.UUID,
    seconds: float,
) -> bool:
    """Whether the current actor (the request's user; none off-request) has an ``action``
    row on the object written in the last ``seconds`` (by the database clock): lets a
    noisy change be recorded at most once per window (e.g. draft saves)."""
    context = _CURRENT.get()
    actor = context.actor_user_id if context else None
    found = await session.execute(
        select(AuditLog.id)
        .where(
            AuditLog.action == action,
            AuditLog.object_type == object_type,
            AuditLog.object_id == str(object_id),
            AuditLog.actor_user_id.is_not_distinct_from(actor),
            AuditLog.at > func.now() - timedelta(seconds=seconds),
        )
        .limit(1)
    )
    return found.first() is not None
