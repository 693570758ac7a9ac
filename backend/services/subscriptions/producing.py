"""Deliveries from the outbox: one per subscription and outbox row it wants.

:class:`DeliveryProducer` follows the same two outboxes the search indexer follows
(``events``: the engine's run changes, written in the transaction of the change;
``audit_log``: ``workflow.publish`` and ``workflow.archive``) with the indexer's
machinery (:class:`backend.search.es_indexer.OutboxIndexer`): rows are read in id order,
an id missing below the highest one read (a transaction still running) holds the stored
position back until it commits or is known gone, and the position
(``search_cursors``, names ``subscriptions:events`` and ``subscriptions:audit``, created
at the newest rows by migration ``0029``) moves only after the deliveries are stored.
Storing is idempotent (unique ``(subscription, source, source_id)``, conflicts ignored),
so a row read twice after a crash makes no second delivery.

A subscription gets the rows written at or after its creation, for the event types it
names, of its workflow (or of its project's workflows, or every workflow). A disabled
subscription gets nothing while disabled.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.db.models import Event, EventDelivery, EventSubscription, Run, Workflow
from backend.search.es_indexer import OutboxIndexer
from backend.services.subscriptions.catalogue import (
    RUN_EVENTS,
    WORKFLOW_EVENTS,
    run_payload,
    workflow_payload,
)

PREFIX = "subscriptions"
"""Cursor names: ``subscriptions:events`` and ``subscriptions:audit``."""


class DeliveryTable:
    """Where produced deliveries go: ``event_deliveries`` (duplicates ignored)."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self.sessionmaker = sessionmaker

    async def bulk(self, operations: list[dict[str, Any]]) -> None:
        """Insert the delivery rows ``operations`` in one transaction."""
        async with self.sessionmaker() as session, session.begin():
            stmt = insert(EventDelivery).values(operations).on_conflict_do_nothing()
            await session.execute(stmt)

    async def delete_runs_of(self, workflow_id: str) -> None:
        """Nothing to do: deliveries go with their subscription (``ON DELETE CASCADE``)."""


class DeliveryProducer(OutboxIndexer):
    """Turns new outbox rows into deliveries (see the module doc). ``base_url``: where
    payload ``url`` members point."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        base_url: str,
        *,
        batch: int = 500,
        gap_grace: float = 1.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        kwargs: dict[str, Any] = {} if clock is None else {"clock": clock}
        super().__init__(
            sessionmaker,
            DeliveryTable(sessionmaker),
            prefix=PREFIX,
            batch=batch,
            gap_grace=gap_grace,
            **kwargs,
        )
        self.base_url = base_url

    async def _operations(
        self, session: AsyncSession, box: Any, rows: Sequence[Any]
    ) -> list[dict[str, Any]]:
        if not rows:
            return []
        subs = list(
            (
                await session.execute(
                    select(EventSubscription).where(EventSubscription.enabled.is_(True))
                )
            ).scalars()
        )
        if not subs:
            return []
        if box.model is Event:
            return await self._run_deliveries(session, rows, subs)
        return await self._workflow_deliveries(session, rows, subs)

    async def _run_deliveries(
        self, session: AsyncSession, rows: Sequence[Any], subs: list[EventSubscription]
    ) -> list[dict[str, Any]]:
        wanted = [r for r in rows if r.kind in RUN_EVENTS and r.run_id is not None]
        if not wanted:
            return []
        found = await session.execute(
            select(Run.id, Run.workflow_id, Run.version_number, Run.trigger, Workflow.project_id)
            .join(Workflow, Workflow.id == Run.workflow_id)
            .where(Run.id.in_({r.run_id for r in wanted}))
        )
        runs = {row.id: row._asdict() for row in found}
        out = []
        for row in wanted:
            run = runs.get(row.run_id)
            if run is None:  # deleted since (retention, workflow deleted): nothing to tell
                continue
            body: bytes | None = None
            for sub in subs:
                if not _wants(sub, row.kind, row.created_at, run["workflow_id"], run["project_id"]):
                    continue
                if body is None:
                    body = run_payload(row.kind, row.created_at, run, row.data or {}, self.base_url)
                out.append(_delivery(sub, "events", row.id, row.kind, str(row.run_id), body))
                out[-1]["run_id"] = row.run_id
        return out

    async def _workflow_deliveries(
        self, session: AsyncSession, rows: Sequence[Any], subs: list[EventSubscription]
    ) -> list[dict[str, Any]]:
        wanted = [r for r in rows if r.action in WORKFLOW_EVENTS and r.object_type == "workflow"]
        if not wanted:
            return []
        ids = {uuid.UUID(r.object_id) for r in wanted}
        found = await session.execute(
            select(Workflow.id, Workflow.name, Workflow.project_id).where(Workflow.id.in_(ids))
        )
        workflows = {row.id: row._asdict() for row in found}
        out = []
        for row in wanted:
            wf = workflows.get(uuid.UUID(row.object_id))
            if wf is None:
                continue
            event_type = WORKFLOW_EVENTS[row.action]
            body: bytes | None = None
            for sub in subs:
                if not _wants(sub, event_type, row.at, wf["id"], wf["project_id"]):
                    continue
                if body is None:
                    body = workflow_payload(
                        event_type, row.at, wf, row.details or {}, self.base_url
                    )
                out.append(_delivery(sub, "audit", row.id, event_type, str(wf["id"]), body))
        return out


def _wants(
    sub: EventSubscription,
    event_type: str,
    at: datetime,
    workflow_id: uuid.UUID,
    project_id: uuid.UUID | None,
) -> bool:
    """Whether ``sub`` wants an event of ``event_type`` written ``at`` about a workflow."""
    if event_type not in sub.events or at < sub.events_since:
        return False
    if sub.workflow_id is not None:
        return sub.workflow_id == workflow_id
    return sub.project_id is None or sub.project_id == project_id


def _delivery(
    sub: EventSubscription, source: str, source_id: int, event_type: str, key: str, body: bytes
) -> dict[str, Any]:
    return {
        "id": uuid.uuid4(),
        "subscription_id": sub.id,
        "source": source,
        "source_id": source_id,
        "event_type": event_type,
        "ordering_key": key,
        "run_id": None,
        "body": body,
        "status": "pending",
        "attempts": 0,
        "next_attempt_at": sub.events_since,  # due at once
    }
