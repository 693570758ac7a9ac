"""The Elasticsearch indexer: follows the transactional outbox and sends bulk requests.

Two outboxes, read in id order: ``events`` (every run change writes one in the same
transaction, so a changed run is re-indexed whole from its current row) and ``audit_log``
(audit documents, and workflow documents re-read on every ``workflow.*`` entry; a deleted
workflow's documents and runs are deleted).

Nothing is lost (docs/search.md, "Elasticsearch"):

- the position in each outbox (``search_cursors``) moves only after Elasticsearch accepted
  the batch; when it is down or refuses (429, 5xx, an item rejected) the same rows are read
  again after a back-off (0.5 s doubling to 30 s);
- an id missing below the highest id read (a *gap*: a transaction that took the id has not
  committed yet, or rolled back) holds the stored position back. A gap is dropped only when
  every transaction that was running when it was seen has ended (the snapshot's ``xmin``
  passed the ``xmax`` recorded then, PostgreSQL manual "Transaction ID and Snapshot
  Information Functions") and ``gap_grace`` seconds have passed; rows after a gap are indexed
  at once, and gap ids that commit later are read by id;
- documents are replaced whole by id, so reading a row twice (after a restart) is harmless.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import or_, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.db.models import AuditLog, Event, SearchCursor
from backend.search.es_documents import (
    audit_document,
    bulk_operations,
    index_name,
    run_document,
    workflow_document,
)
from backend.search.es_loading import load_runs, load_workflows

log = logging.getLogger(__name__)

MAX_GAP_IDS = 100_000  # a jump wider than this (a restored sequence) is not waited for


class SinkUnavailable(Exception):
    """Elasticsearch did not take the batch (down, 429, 5xx, an item rejected): retry."""


class BulkSink(Protocol):
    """Where documents go (:class:`backend.search.elastic.ElasticSearch`)."""

    async def bulk(self, operations: list[dict[str, Any]]) -> None:
        """Send one ``_bulk`` body; raises :class:`SinkUnavailable` unless every item
        was accepted."""
        ...

    async def delete_runs_of(self, workflow_id: str) -> None:
        """Delete every run document of a deleted workflow (``_delete_by_query``)."""
        ...


@dataclass
class _Gap:
    low: int
    high: int
    xmax: int  # snapshot xmax when the gap was seen
    seen: float  # clock time when seen


@dataclass
class _Outbox:
    name: str
    model: Any
    cursor: int = 0
    high: int = 0
    gaps: list[_Gap] = field(default_factory=list)
    loaded: bool = False


@dataclass(frozen=True)
class _Snapshot:
    xmin: int
    xmax: int


class OutboxIndexer:
    """Indexes what the outboxes say changed.

    ``sessionmaker``: the database; ``sink``: Elasticsearch; ``prefix``: the index prefix;
    ``batch``: outbox rows per bulk request; ``clock``: seconds (monotonic).
    """

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        sink: BulkSink,
        *,
        prefix: str,
        batch: int = 500,
        gap_grace: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.sink = sink
        self.prefix = prefix
        self.batch = batch
        self.gap_grace = gap_grace
        self.clock = clock
        self.outboxes = [
            _Outbox(f"{prefix}:events", Event),
            _Outbox(f"{prefix}:audit", AuditLog),
        ]

    async def _load_cursor(self, session: AsyncSession, box: _Outbox) -> None:
        stored = await session.get(SearchCursor, box.name)
        if stored is not None:
            box.cursor = stored.position
        else:  # never indexed: start at the oldest row there is
            first = await session.execute(select(box.model.id).order_by(box.model.id).limit(1))
            box.cursor = max((first.scalar() or 1) - 1, 0)
        box.high, box.gaps, box.loaded = box.cursor, [], True

    async def _save_cursor(self, box: _Outbox) -> None:
        async with self.sessionmaker() as session, session.begin():
            stmt = insert(SearchCursor).values(name=box.name, position=box.cursor)
            await session.execute(
                stmt.on_conflict_do_update(
                    index_elements=[SearchCursor.name],
                    set_={"position": box.cursor, "updated_at": text("now()")},
                )
            )

    async def index_once(self) -> int:
        """One round over both outboxes; returns how many outbox rows were indexed.
        Raises :class:`SinkUnavailable` (nothing moved) when Elasticsearch refused."""
        done = 0
        for box in self.outboxes:
            done += await self._round(box)
        return done

    async def _round(self, box: _Outbox) -> int:
        async with self.sessionmaker() as session:
            await session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            if not box.loaded:
                await self._load_cursor(session, box)
            snap = (
                await session.execute(
                    text(
                        "select pg_snapshot_xmin(pg_current_snapshot())::text::bigint,"
                        " pg_snapshot_xmax(pg_current_snapshot())::text::bigint"
                    )
                )
            ).one()
            snapshot = _Snapshot(int(snap[0]), int(snap[1]))
            model = box.model
            new_rows = list(
                (
                    await session.execute(
                        select(model)
                        .where(model.id > box.high)
                        .order_by(model.id)
                        .limit(self.batch)
                    )
                ).scalars()
            )
            gap_rows: list[Any] = []
            if box.gaps:
                ranges = [model.id.between(g.low, g.high) for g in box.gaps]
                gap_rows = list(
                    (await session.execute(select(model).where(or_(*ranges)))).scalars()
                )
            rows = gap_rows + new_rows
            operations = await self._operations(session, box, rows)
            gap_ids, new_ids = [r.id for r in gap_rows], [r.id for r in new_rows]
            await session.rollback()
        deleted_workflows = [op for op in operations if "_delete_runs_of" in op]
        ops = [op for op in operations if "_delete_runs_of" not in op]
        if ops:
            await self.sink.bulk(ops)
        for op in deleted_workflows:
            await self.sink.delete_runs_of(op["_delete_runs_of"])
        moved = self._advance(box, gap_ids, new_ids, snapshot)
        if moved or rows:
            await self._save_cursor(box)
        return len(rows)

    async def _operations(
        self, session: AsyncSession, box: _Outbox, rows: Sequence[Any]
    ) -> list[dict[str, Any]]:
        if not rows:
            return []
        if box.model is Event:
            run_ids = sorted({str(r.run_id) for r in rows if r.run_id is not None})
            found = await load_runs(session, run_ids)
            missing = [rid for rid in run_ids if rid not in found]
            docs = [run_document(found[rid]) for rid in run_ids if rid in found]
            return bulk_operations(index_name(self.prefix, "runs"), docs, missing)
        audit_docs = [audit_document(_row_dict(r)) for r in rows]
        ops = bulk_operations(index_name(self.prefix, "audit"), audit_docs)
        wf_ids = sorted({r.object_id for r in rows if r.object_type == "workflow"})
        if wf_ids:
            found = await load_workflows(session, wf_ids)
            missing = [wid for wid in wf_ids if wid not in found]
            # an archived workflow leaves the workflow index (as it leaves the lists); its
            # runs stay searchable; a workflow gone from the database takes its runs along
            archived = [wid for wid in wf_ids if wid in found and found[wid]["archived"]]
            docs = [
                workflow_document(found[wid])
                for wid in wf_ids
                if wid in found and not found[wid]["archived"]
            ]
            ops += bulk_operations(index_name(self.prefix, "workflows"), docs, missing + archived)
            ops += [{"_delete_runs_of": wid} for wid in missing]
        return ops

    def _advance(
        self, box: _Outbox, gap_ids: list[int], new_ids: list[int], snap: _Snapshot
    ) -> bool:
        """Record what was read; returns whether the stored position moves."""
        now = self.clock()
        expected = box.high + 1
        for row_id in new_ids:
            if row_id > expected and row_id - expected <= MAX_GAP_IDS:
                box.gaps.append(_Gap(expected, row_id - 1, snap.xmax, now))
            expected = row_id + 1
        if new_ids:
            box.high = new_ids[-1]
        found = set(gap_ids)
        kept: list[_Gap] = []
        for gap in box.gaps:
            if snap.xmin >= gap.xmax and now - gap.seen >= self.gap_grace:
                continue  # final: every transaction that could hold these ids has ended
            kept += _split(gap, found)
        box.gaps = kept
        cursor = min(g.low for g in kept) - 1 if kept else box.high
        moved = cursor != box.cursor
        box.cursor = cursor
        return moved

    async def run(
        self, stop: asyncio.Event, *, idle: float = 0.2, max_backoff: float = 30.0
    ) -> None:
        """Index until ``stop`` is set: at once while rows keep coming, every ``idle``
        seconds otherwise, backing off from 0.5 s to ``max_backoff`` while Elasticsearch
        or PostgreSQL is unavailable (the same rows are read again; nothing is lost)."""
        backoff = 0.5
        while not stop.is_set():
            try:
                done = await self.index_once()
                backoff = 0.5
                wait = 0.0 if done else idle
            except SinkUnavailable as exc:
                log.warning("search index unavailable, retrying in %.1f s: %s", backoff, exc)
                wait, backoff = backoff, min(backoff * 2, max_backoff)
            except Exception as exc:  # database outage: the same back-off
                log.warning("search indexer failed, retrying in %.1f s: %r", backoff, exc)
                wait, backoff = backoff, min(backoff * 2, max_backoff)
            if wait:
                try:
                    await asyncio.wait_for(stop.wait(), timeout=wait)
                except TimeoutError:
                    pass


def _split(gap: _Gap, found: set[int]) -> list[_Gap]:
    """What is left of ``gap`` once the ids in ``found`` appeared."""
    if not found:
        return [gap]
    out: list[_Gap] = []
    low: int | None = None
    for i in range(gap.low, gap.high + 1):
        if i in found:
            if low is not None:
                out.append(_Gap(low, i - 1, gap.xmax, gap.seen))
                low = None
        elif low is None:
            low = i
    if low is not None:
        out.append(_Gap(low, gap.high, gap.xmax, gap.seen))
    return out


def _row_dict(row: Any) -> dict[str, Any]:
    return {c.key: getattr(row, c.key) for c in row.__table__.columns}
