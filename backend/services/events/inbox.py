"""The inbox: every event a connector trigger hears is stored once, then starts one run.

:func:`insert_events` stores events in the caller's transaction (a polling trigger's
cursor changes in the same one), unique per ``(workflow, event id)``: a redelivered,
retried or re-polled event inserts nothing. :func:`start_runs` starts the stored events'
runs with the idempotency key ``trigger-event:<row id>`` and links each row to its run,
so a start repeated after a crash (by the same process or the sweep,
:func:`start_pending`) is the same run. An event row is written before any broker ack,
poll cursor or vendor answer says "received": what is acknowledged is durable.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.db.models import TriggerDeadLetter, TriggerEventRow, WorkflowVersion
from backend.engine.ports import VersionRow
from backend.services.availability import database_unavailable
from backend.services.execution import Execution
from backend.services.storable import UnstorableInput, check_storable
from connectors.sdk import TriggerEvent
from connectors.sdk.triggers import MAX_EVENT_ID

log = logging.getLogger(__name__)

MAX_DEAD_LETTER = 64 * 1024
"""Characters of a dead letter's message kept (the rest is cut, and says so)."""


@dataclass(frozen=True)
class Source:
    """Where events come from: the subscription's workflow, the version active when they
    were heard, the trigger's node type and kind (the runs' ``trigger``)."""

    workflow_id: uuid.UUID
    version_number: int
    node_type: str
    kind: str


class InvalidEvent(ValueError):
    """An event the inbox cannot store (no id, too long an id, unstorable data); the
    message says which and where."""


def idempotency_key(event_row_id: int) -> str:
    """The idempotency key of the run an inbox row starts."""
    return f"trigger-event:{event_row_id}"


def _checked(event: TriggerEvent) -> None:
    if not isinstance(event, TriggerEvent):
        raise InvalidEvent(f"{event!r} is not a TriggerEvent")
    if not event.id or len(event.id) > MAX_EVENT_ID:
        raise InvalidEvent(f"an event id must have 1 to {MAX_EVENT_ID} characters: {event.id!r}")
    try:
        check_storable(event.data, "data")
    except UnstorableInput as err:
        raise InvalidEvent(f"event {event.id}: {err}") from None


BASELINE = "baseline: there before the trigger was activated (no run)"
"""``error`` of an inbox row a polling trigger's first poll saw: remembered, so an
overlapping later page does not start it, but never started."""


async def insert_events(
    session: AsyncSession,
    source: Source,
    events: Sequence[TriggerEvent],
    now: datetime,
    *,
    baseline: bool = False,
) -> list[int]:
    """Store ``events`` (in the caller's transaction); returns the ids of the rows that
    are new, in order: an event whose id the workflow has seen is skipped. ``baseline``:
    remember the ids only (no data, no run, :data:`BASELINE`). Raises
    :class:`InvalidEvent` before writing anything when an event cannot be stored."""
    for event in events:
        _checked(event)
    seen: set[str] = set()
    rows = []
    for event in events:
        if event.id in seen:  # one statement cannot insert a key twice
            continue
        seen.add(event.id)
        rows.append(
            {
                "workflow_id": source.workflow_id,
                "version_number": source.version_number,
                "node_type": source.node_type,
                "kind": source.kind,
                "dedupe_key": event.id,
                "data": None if baseline else event.data,
                "meta": dict(event.meta),
                "received_at": now,
                "error": BASELINE if baseline else None,
            }
        )
    if not rows:
        return []
    statement = (
        insert(TriggerEventRow)
        .values(rows)
        .on_conflict_do_nothing(index_elements=["workflow_id", "dedupe_key"])
        .returning(TriggerEventRow.id)
    )
    return sorted((await session.execute(statement)).scalars())


async def insert_dead_letter(
    session: AsyncSession,
    source: Source,
    reason: str,
    raw: bytes | str,
    meta: dict[str, str],
    now: datetime,
) -> int:
    """Keep a message no event could be made of; returns its row id. Bytes that are not
    UTF-8 are kept as base64; the text is cut to :data:`MAX_DEAD_LETTER` characters."""
    encoding = "utf-8"
    if isinstance(raw, bytes):
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            text, encoding = base64.b64encode(raw).decode(), "base64"
    else:
        text = raw
    text = text.replace("\x00", "\\u0000")
    if len(text) > MAX_DEAD_LETTER:
        text = text[:MAX_DEAD_LETTER] + f"... ({len(text) - MAX_DEAD_LETTER} characters cut)"
    row = TriggerDeadLetter(
        workflow_id=source.workflow_id,
        node_type=source.node_type,
        received_at=now,
        reason=reason[:2000],
        raw=text,
        encoding=encoding,
        meta={str(k): str(v) for k, v in meta.items()},
    )
    session.add(row)
    await session.flush()
    return int(row.id)


class VersionCache:
    """Version ids by ``(workflow, number)`` (a version is immutable, so never stale)."""

    def __init__(self) -> None:
        self._known: dict[tuple[uuid.UUID, int], VersionRow] = {}

    async def get(
        self, session: AsyncSession, workflow_id: uuid.UUID, number: int
    ) -> VersionRow | None:
        key = (workflow_id, number)
        if key not in self._known:
            found = (
                await session.execute(
                    select(WorkflowVersion.id).where(
                        WorkflowVersion.workflow_id == workflow_id,
                        WorkflowVersion.number == number,
                    )
                )
            ).scalar_one_or_none()
            if found is None:
                return None
            if len(self._known) > 10_000:
                self._known.clear()
            self._known[key] = VersionRow(found, workflow_id, number)
        return self._known[key]


VERSIONS = VersionCache()


async def start_runs(
    sessionmaker: async_sessionmaker[AsyncSession], execution: Execution, ids: Sequence[int]
) -> dict[int, uuid.UUID]:
    """Start the runs of the inbox rows ``ids`` that have none yet; returns ``{row id: run
    id}`` of the rows linked now.

    A row whose run cannot start (its version is gone, its input is refused) keeps the
    reason in ``error`` and is not tried again; a lost database raises (the rows stay
    pending and the sweep, :func:`start_pending`, starts them later).
    """
    if not ids:
        return {}
    async with sessionmaker() as session:
        rows = (
            await session.execute(
                select(
                    TriggerEventRow.id,
                    TriggerEventRow.workflow_id,
                    TriggerEventRow.version_number,
                    TriggerEventRow.kind,
                    TriggerEventRow.data,
                )
                .where(TriggerEventRow.id.in_(list(ids)), TriggerEventRow.run_id.is_(None))
                .order_by(TriggerEventRow.id)
            )
        ).all()
        versions = {
            (r.workflow_id, r.version_number): await VERSIONS.get(
                session, r.workflow_id, r.version_number
            )
            for r in rows
        }
    linked: dict[int, uuid.UUID] = {}
    failed: dict[int, str] = {}
    for row in rows:
        version = versions[(row.workflow_id, row.version_number)]
        if version is None:
            failed[row.id] = f"version {row.version_number} of the workflow no longer exists"
            continue
        try:
            started = await execution.start_run(
                version, row.data, trigger=row.kind, idempotency_key=idempotency_key(row.id)
            )
        except Exception as exc:
            if database_unavailable(exc):
                raise
            log.exception("trigger event %s: its run could not start", row.id)
            failed[row.id] = f"{type(exc).__name__}: {exc}"[:2000]
            continue
        linked[row.id] = started.run_id
    if linked or failed:
        async with sessionmaker() as session, session.begin():
            for row_id, run_id in linked.items():
                await session.execute(
                    update(TriggerEventRow)
                    .where(TriggerEventRow.id == row_id)
                    .values(run_id=run_id, data=None)
                )
            for row_id, reason in failed.items():
                await session.execute(
                    update(TriggerEventRow).where(TriggerEventRow.id == row_id).values(error=reason)
                )
    return linked


async def start_pending(
    sessionmaker: async_sessionmaker[AsyncSession],
    execution: Execution,
    now: datetime,
    *,
    older_than: float = 10.0,
    limit: int = 500,
) -> int:
    """The sweep: start the runs of inbox rows received more than ``older_than`` seconds
    before ``now`` that have neither run nor error (their process died between storing
    and starting); returns how many it linked."""
    cutoff = now - timedelta(seconds=older_than)
    async with sessionmaker() as session:
        ids = (
            (
                await session.execute(
                    select(TriggerEventRow.id)
                    .where(
                        TriggerEventRow.run_id.is_(None),
                        TriggerEventRow.error.is_(None),
                        TriggerEventRow.received_at < cutoff,
                    )
                    .order_by(TriggerEventRow.received_at)
                    .limit(limit)
                )
            )
            .scalars()
            .all()
        )
    return len(await start_runs(sessionmaker, execution, list(ids)))
