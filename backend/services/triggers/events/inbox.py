"""The inbox: every event a connector trigger hears is stored once, then starts one run.

:func:`insert_events` stores events in the caller's transaction (a polling trigger's
cursor changes in the same one), unique per ``(workflow, event id)``: a redelivered,
retried or re-polled event inserts nothing. :func:`start_runs` starts the stored events'
runs with the idempotency key ``trigger-event:<row id>`` and links each row to its run,
so a start repeated after a crash (by the same process or the sweep,
:func:`start_pending`) is the same run. An event row is written before any broker ack,
poll cursor or vendor answer says "received": what is acknowledged is durable.

Any number of events cost the same few statements: the events travel as one JSON array
(:func:`encode_event`) into one ``INSERT``; their runs start concurrently, so the run
store writes them in groups (backend/db/group_commit.py); one ``UPDATE`` links them all.
:class:`EventBatches` stores and starts the events that concurrent callers (a listening
trigger's ``emit``) hand in at the same moment together, one group at a time.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import msgspec
from sqlalchemy import BigInteger, String, select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.db.group_commit import GroupCommit, numbered
from backend.db.models import TriggerDeadLetter, TriggerEventRow, WorkflowVersion
from backend.engine.ports import VersionRow
from backend.services.availability import database_unavailable
from backend.services.runs.execution import Execution
from backend.services.runs.storable import UnstorableInput, check_storable
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


def encode_event(event: TriggerEvent, *, baseline: bool = False) -> bytes:
    """``event`` as the JSON object the insert statement reads (``{"id", "data",
    "meta"}``; ``baseline``: without its data). Raises :class:`InvalidEvent` when it
    cannot be stored: not a TriggerEvent, no id or too long an id, data that is not JSON
    or holds a character PostgreSQL refuses."""
    if not isinstance(event, TriggerEvent):
        raise InvalidEvent(f"{event!r} is not a TriggerEvent")
    if not event.id or len(event.id) > MAX_EVENT_ID:
        raise InvalidEvent(f"an event id must have 1 to {MAX_EVENT_ID} characters: {event.id!r}")
    try:
        check_storable(event.data, "data")
        if baseline:
            return msgspec.json.encode(TriggerEvent(event.id, None, event.meta))
        return msgspec.json.encode(event)
    except UnstorableInput as err:
        raise InvalidEvent(f"event {event.id}: {err}") from None
    except (msgspec.EncodeError, TypeError, ValueError, OverflowError) as err:
        raise InvalidEvent(f"event {event.id}: its data is not JSON: {err}") from None


# The events of ``:events`` (``ord``: their position; distinct ids) inserted unless the
# workflow has seen their id; one row (``ord``, new row id) per event inserted.
_INSERT_EVENTS = text(
    """
    INSERT INTO trigger_events (workflow_id, version_number, node_type, kind, dedupe_key,
                                data, meta, received_at, error)
    SELECT CAST(:workflow_id AS uuid), :version_number, :node_type, :kind, e.id, e.data,
           coalesce(e.meta, '{}'::jsonb), :received_at, :error
    FROM jsonb_to_recordset(CAST(:events AS jsonb)) AS e(ord int, id text, data jsonb, meta jsonb)
    ORDER BY e.ord
    ON CONFLICT (workflow_id, dedupe_key) DO NOTHING
    RETURNING id, dedupe_key
    """
).columns(id=BigInteger(), dedupe_key=String())


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
    encoded = [encode_event(event, baseline=baseline) for event in events]
    found = await insert_encoded(session, source, encoded, now, baseline=baseline)
    return sorted(row_id for row_id in found if row_id is not None)


async def insert_encoded(
    session: AsyncSession,
    source: Source,
    encoded: Sequence[bytes],
    now: datetime,
    *,
    baseline: bool = False,
) -> list[int | None]:
    """:func:`insert_events` of events already encoded (:func:`encode_event`), in one
    statement; per event, in order, the id of its new row, or ``None`` when the workflow
    had its id already (an id twice in ``encoded``: its first is the new row)."""
    ids = [msgspec.json.decode(item, type=_EventId).id for item in encoded]
    first: dict[str, int] = {}
    distinct = []
    for position, event_id in enumerate(ids):
        if event_id not in first:  # one statement cannot insert a key twice
            first[event_id] = position
            distinct.append(encoded[position])
    if not distinct:
        return []
    rows = await session.execute(
        _INSERT_EVENTS,
        {
            "workflow_id": str(source.workflow_id),
            "version_number": source.version_number,
            "node_type": source.node_type,
            "kind": source.kind,
            "received_at": now,
            "error": BASELINE if baseline else None,
            "events": numbered(distinct),
        },
    )
    new = {key: row_id for row_id, key in rows}
    return [
        new.get(event_id) if first[event_id] == position else None
        for position, event_id in enumerate(ids)
    ]


class _EventId(msgspec.Struct):
    id: str


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


@dataclass(frozen=True)
class Stored:
    """An inbox row whose run is to start: its id, where it came from, the run input."""

    id: int
    workflow_id: uuid.UUID
    version_number: int
    kind: str
    data: Any


async def start_runs(
    sessionmaker: async_sessionmaker[AsyncSession], execution: Execution, ids: Sequence[int]
) -> dict[int, uuid.UUID]:
    """Start the runs of the inbox rows ``ids`` that have none yet; returns ``{row id: run
    id}`` of the rows linked now (:func:`start_stored`, the rows read back first)."""
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
    return await start_stored(sessionmaker, execution, [Stored(*row) for row in rows])


START_CONCURRENCY = 256
"""Run starts one :func:`start_stored` call has in flight at once."""

# Each inbox row of ``:links`` gets its run (its data, now the run's input, dropped) or
# the reason it starts none.
_LINK = text(
    """
    UPDATE trigger_events t
    SET run_id = l.run_id,
        error = l.error,
        data = CASE WHEN l.run_id IS NULL THEN t.data END
    FROM jsonb_to_recordset(CAST(:links AS jsonb)) AS l(id bigint, run_id uuid, error text)
    WHERE t.id = l.id
    """
)


async def start_stored(
    sessionmaker: async_sessionmaker[AsyncSession],
    execution: Execution,
    rows: Sequence[Stored],
) -> dict[int, uuid.UUID]:
    """Start the runs of the inbox ``rows`` (concurrently, in order of their ids, so the
    run store writes them in groups) and link them in one statement; returns ``{row id:
    run id}`` of the rows linked.

    A row whose run cannot start (its version is gone, its input is refused) keeps the
    reason in ``error`` and is not tried again; a lost database raises (the rows stay
    pending and the sweep, :func:`start_pending`, starts them later).
    """
    if not rows:
        return {}
    rows = sorted(rows, key=lambda r: r.id)
    versions: dict[tuple[uuid.UUID, int], VersionRow | None] = {}
    async with sessionmaker() as session:
        for row in rows:
            key = (row.workflow_id, row.version_number)
            if key not in versions:
                versions[key] = await VERSIONS.get(session, *key)
    gate = asyncio.Semaphore(START_CONCURRENCY)

    async def start(row: Stored) -> uuid.UUID | str:
        version = versions[(row.workflow_id, row.version_number)]
        if version is None:
            return f"version {row.version_number} of the workflow no longer exists"
        async with gate:
            started = await execution.start_run(
                version, row.data, trigger=row.kind, idempotency_key=idempotency_key(row.id)
            )
        return started.run_id

    outcomes = await asyncio.gather(*(start(row) for row in rows), return_exceptions=True)
    linked: dict[int, uuid.UUID] = {}
    links = []
    lost: BaseException | None = None
    for row, outcome in zip(rows, outcomes, strict=True):
        if isinstance(outcome, uuid.UUID):
            linked[row.id] = outcome
            links.append({"id": row.id, "run_id": str(outcome), "error": None})
            continue
        if isinstance(outcome, BaseException):
            if not isinstance(outcome, Exception) or database_unavailable(outcome):
                lost = lost or outcome
                continue
            log.error("trigger event %s: its run could not start", row.id, exc_info=outcome)
            outcome = f"{type(outcome).__name__}: {outcome}"[:2000]
        links.append({"id": row.id, "run_id": None, "error": outcome})
    if links:
        async with sessionmaker() as session, session.begin():
            await session.execute(_LINK, {"links": msgspec.json.encode(links).decode()})
    if lost is not None:
        raise lost
    return linked


EMIT_BATCH = 256
"""Events :class:`EventBatches` stores in one group at most."""


class EventBatches:
    """Stores and starts the events of one source that concurrent callers hand in at the
    same moment together (:class:`~backend.db.group_commit.GroupCommit`: at low load each
    event is its own group; under load a group is every event that arrived while the
    previous ones were written, up to ``max_items``): one insert, their runs started
    concurrently, one link, for the whole group. Two groups are written at a time, so
    one group's runs start while the next is stored."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        execution: Execution,
        source: Source,
        *,
        max_items: int = EMIT_BATCH,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.execution = execution
        self.source = source
        self.groups: GroupCommit[int | None] = GroupCommit(
            self._write, max_items=max_items, max_in_flight=2
        )

    async def submit(self, encoded: bytes) -> int | None:
        """Store one event (:func:`encode_event`) and start its run; returns its new row's
        id, or ``None`` when the workflow had its id already (stored before: its run is
        started by whoever stored it, or the sweep). Returns only once the event is
        stored and, when new, its run too (or its start failed for good: the row says
        why). Raises what storing it raised (a lost database)."""
        return await self.groups.submit(encoded)

    async def _write(self, items: Sequence[bytes]) -> list[int | None]:
        source = self.source
        async with self.sessionmaker() as session, session.begin():
            found = await insert_encoded(session, source, items, self.execution.clock.now())
        rows = [
            Stored(
                row_id,
                source.workflow_id,
                source.version_number,
                source.kind,
                msgspec.json.decode(item, type=TriggerEvent).data,
            )
            for item, row_id in zip(items, found, strict=True)
            if row_id is not None
        ]
        await start_stored(self.sessionmaker, self.execution, rows)
        return found


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
