"""What the workflow's trigger page, the designer and the run page show of the event
service: the status line of a workflow's subscription, its recent events and dead
letters, and the event that started a run."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import TriggerDeadLetter, TriggerEventRow, TriggerSubscription
from backend.services.triggers.events.kinds import LISTEN_KINDS

RECENT = 20
"""Events and dead letters listed on the trigger page."""


@dataclass
class TriggerStatus:
    """A workflow's connector trigger as its pages show it.

    ``line`` is the one-line summary ("Registered · last event 10:02:03 · ..."); ``state``
    one of ``ok``, ``failing``, ``pending``, ``disabled``; ``url`` the app webhook URL
    (``None`` for other kinds).
    """

    kind: str
    node_type: str
    enabled: bool
    state: str
    line: str
    url: str | None
    version_number: int
    registration_status: str
    last_polled_at: datetime | None
    next_poll_at: datetime | None
    last_event_at: datetime | None
    last_error: str | None
    last_error_at: datetime | None
    failures: int
    holder: str | None
    events: list[dict[str, Any]] = field(default_factory=list)
    dead_letters: list[dict[str, Any]] = field(default_factory=list)


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value is not None else "never"


def _error_is_current(row: TriggerSubscription) -> bool:
    """Whether the last error is newer than the last event (an older one is over: events
    came in after it)."""
    if not row.last_error:
        return False
    if row.last_event_at is None or row.last_error_at is None:
        return True
    return row.last_error_at >= row.last_event_at


def _line(row: TriggerSubscription, now: datetime) -> tuple[str, str]:
    """``(state, line)``: ``failing`` while the last error is newer than the last event
    (a listener then reads "failing", not "listening", though it holds its lease)."""
    parts: list[str] = []
    state = "ok"
    current = _error_is_current(row)
    if not row.enabled and row.version_number == 0:
        return "disabled", (
            "Not published yet: deliveries to this URL reach the designer only while it "
            "listens for a test event"
        )
    if not row.enabled:
        return "disabled", "Not active (the workflow was archived or its trigger replaced)"
    if row.kind == "polling":
        parts.append(f"last polled {_when(row.last_polled_at)}")
        parts.append(f"next poll {_when(row.next_poll_at)}")
    elif row.kind == "app_webhook":
        status = {
            "none": "receiving (no registration needed)",
            "pending": "registering at the vendor",
            "registered": "registered at the vendor",
            "failed": "registration failed (retrying)",
        }.get(row.registration_status, row.registration_status)
        parts.append(status)
        if row.registration_status == "pending":
            state = "pending"
    elif row.kind in LISTEN_KINDS:
        held = row.lease_owner is not None and row.lease_until is not None and row.lease_until > now
        parts.append(
            ("failing (reconnecting)" if current else "listening")
            if held
            else "waiting for an events process"
        )
        if not held:
            state = "pending"
    parts.append(f"last event {_when(row.last_event_at)}")
    if current:
        state = "failing"
    if row.last_error:
        parts.append(f"last error {_when(row.last_error_at)}: {row.last_error}")
    return state, " · ".join(parts)


async def trigger_status(
    session: AsyncSession, workflow_id: uuid.UUID, base_url: str, now: datetime
) -> TriggerStatus | None:
    """The status of the workflow's connector trigger, with its recent events and dead
    letters (newest first); ``None`` when it never had one."""
    row = (
        await session.execute(
            select(TriggerSubscription).where(TriggerSubscription.workflow_id == workflow_id)
        )
    ).scalar_one_or_none()
    if row is None:
        return None
    state, line = _line(row, now)
    events = (
        await session.execute(
            select(TriggerEventRow)
            .where(TriggerEventRow.workflow_id == workflow_id)
            .order_by(TriggerEventRow.id.desc())
            .limit(RECENT)
        )
    ).scalars()
    letters = (
        await session.execute(
            select(TriggerDeadLetter)
            .where(TriggerDeadLetter.workflow_id == workflow_id)
            .order_by(TriggerDeadLetter.id.desc())
            .limit(RECENT)
        )
    ).scalars()
    url = f"{base_url.rstrip('/')}/hooks/app/{row.token}" if row.kind == "app_webhook" else None
    return TriggerStatus(
        kind=row.kind,
        node_type=row.node_type,
        enabled=row.enabled,
        state=state,
        line=line,
        url=url,
        version_number=row.version_number,
        registration_status=row.registration_status,
        last_polled_at=row.last_polled_at,
        next_poll_at=row.next_poll_at,
        last_event_at=row.last_event_at,
        last_error=row.last_error,
        last_error_at=row.last_error_at,
        failures=row.failures,
        holder=row.lease_owner,
        events=[
            {
                "received_at": e.received_at,
                "id": e.dedupe_key,
                "meta": e.meta,
                "run_id": str(e.run_id) if e.run_id else None,
                "error": e.error,
            }
            for e in events
        ],
        dead_letters=[
            {
                "received_at": d.received_at,
                "reason": d.reason,
                "raw": d.raw[:2000],
                "encoding": d.encoding,
                "meta": d.meta,
            }
            for d in letters
        ],
    )


async def event_of_run(session: AsyncSession, run_id: uuid.UUID) -> dict[str, Any] | None:
    """The trigger event that started the run: ``{"kind", "node_type", "id",
    "received_at", "meta"}`` (``meta``: the vendor delivery id, broker message id, email
    Message-ID, ...), or ``None`` when no connector trigger started it."""
    row = (
        await session.execute(select(TriggerEventRow).where(TriggerEventRow.run_id == run_id))
    ).scalar_one_or_none()
    if row is None:
        return None
    return {
        "kind": row.kind,
        "node_type": row.node_type,
        "id": row.dedupe_key,
        "received_at": row.received_at,
        "meta": dict(row.meta),
    }
